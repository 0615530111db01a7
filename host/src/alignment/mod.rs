//! Parallelism alignment: built-in, legacy and ADVANCED modes, per-job resolution, the guard.
