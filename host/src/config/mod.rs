//! Reading fleet and job configuration.
