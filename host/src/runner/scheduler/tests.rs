//! The scheduler on its own, with tasks that record what they see.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::plugins::plugin_call;

fn config(workers: usize) -> PoolConfig {
    PoolConfig {
        workers,
        network_threads: 4,
        stuck_after: None,
        max_substitutes: 2,
    }
}

/// Steps `steps` times, `every` apart, calling `body` with the step number; records into
/// `log` its name and step number.
struct Ticker<'a> {
    name: String,
    lane: Lane,
    steps: usize,
    done: usize,
    every: Duration,
    body: &'a (dyn Fn(&str, usize) + Sync),
    /// Where `body` publishes the task's time, if it does.
    time: Option<Arc<TaskTime>>,
}

impl<'a> Task<'a> for Ticker<'a> {
    fn step(&mut self, _: &mut Vec<BoxedTask<'a>>) -> Next {
        (self.body)(&self.name, self.done);
        self.done += 1;
        if self.done == self.steps {
            Next::Done
        } else {
            Next::At(Instant::now() + self.every)
        }
    }
    fn lane(&self) -> Lane {
        self.lane
    }
    fn label(&self) -> &str {
        &self.name
    }
    fn time(&self) -> Option<&Arc<TaskTime>> {
        self.time.as_ref()
    }
    fn panicked(&mut self) {}
}

fn ticker<'a>(
    name: &str,
    steps: usize,
    every: Duration,
    body: &'a (dyn Fn(&str, usize) + Sync),
) -> BoxedTask<'a> {
    Box::new(Ticker {
        name: name.to_string(),
        lane: Lane::Compute,
        steps,
        done: 0,
        every,
        body,
        time: None,
    })
}

/// First step: asks to run again at `start + delay`; second step: records its name.
struct DueAt<'a> {
    name: String,
    due: Instant,
    stepped: bool,
    order: &'a Mutex<Vec<String>>,
}

impl<'a> Task<'a> for DueAt<'a> {
    fn step(&mut self, _: &mut Vec<BoxedTask<'a>>) -> Next {
        if self.stepped {
            self.order.lock().unwrap().push(self.name.clone());
            return Next::Done;
        }
        self.stepped = true;
        Next::At(self.due)
    }
    fn lane(&self) -> Lane {
        Lane::Compute
    }
    fn label(&self) -> &str {
        &self.name
    }
    fn panicked(&mut self) {}
}

#[test]
fn tasks_run_in_the_order_they_are_due_not_the_order_they_were_queued() {
    let stop = AtomicBool::new(false);
    let order = Mutex::new(Vec::new());
    let start = Instant::now() + Duration::from_millis(100);
    // Queued a, b, c, d; due d, b, c, a (10 ms apart).
    let delays = [("a", 30), ("b", 10), ("c", 20), ("d", 0)];
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config(1), &stop, None);
        for (name, delay) in delays {
            pool.submit(Box::new(DueAt {
                name: name.to_string(),
                due: start + Duration::from_millis(delay),
                stepped: false,
                order: &order,
            }));
        }
        pool.wait_idle();
        assert!(Instant::now() >= start + Duration::from_millis(30));
    });
    assert_eq!(order.into_inner().unwrap(), ["d", "b", "c", "a"]);
}

#[test]
fn one_task_never_runs_on_two_workers_at_once() {
    let stop = AtomicBool::new(false);
    let inside: Vec<AtomicBool> = (0..8).map(|_| AtomicBool::new(false)).collect();
    let overlaps = AtomicUsize::new(0);
    let steps = AtomicUsize::new(0);
    let body = |name: &str, _: usize| {
        let i: usize = name.parse().unwrap();
        if inside[i].swap(true, Ordering::AcqRel) {
            overlaps.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_micros(300));
        inside[i].store(false, Ordering::Release);
        steps.fetch_add(1, Ordering::Relaxed);
    };
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config(4), &stop, None);
        for i in 0..8 {
            // Always due: four idle workers would take the same task at once if they could.
            pool.submit(ticker(&i.to_string(), 50, Duration::ZERO, &body));
        }
        pool.wait_idle();
    });
    assert_eq!(steps.into_inner(), 8 * 50);
    assert_eq!(overlaps.into_inner(), 0);
}

#[test]
fn a_blocked_network_step_does_not_delay_the_computing_tasks() {
    let stop = AtomicBool::new(false);
    let ticks = AtomicUsize::new(0);
    let blocked_until = Mutex::new(None);
    let tick = |_: &str, _: usize| {
        ticks.fetch_add(1, Ordering::Relaxed);
    };
    let block = |_: &str, _: usize| {
        std::thread::sleep(Duration::from_millis(600));
        *blocked_until.lock().unwrap() = Some(Instant::now());
    };
    let started = Instant::now();
    std::thread::scope(|scope| {
        // One compute worker: if the slow step ran on it, nothing else would run meanwhile.
        let pool = Scheduler::start(scope, config(1), &stop, None);
        pool.submit(Box::new(Ticker {
            name: "slow".into(),
            lane: Lane::Network,
            steps: 1,
            done: 0,
            every: Duration::ZERO,
            body: &block,
            time: None,
        }));
        pool.submit(ticker("fast", 20, Duration::from_millis(10), &tick));
        pool.wait_idle();
    });
    // 20 steps 10 ms apart end about 200 ms in: well before the slow step's 600 ms.
    assert_eq!(ticks.into_inner(), 20);
    let slow_end = blocked_until.into_inner().unwrap().expect("slow step ran");
    assert!(slow_end >= started + Duration::from_millis(600));
}

#[test]
fn a_worker_stuck_in_a_plugin_call_is_reported_and_replaced() {
    let stop = AtomicBool::new(false);
    let stuck: Mutex<Vec<(String, Option<i64>, Duration)>> = Mutex::new(Vec::new());
    let report = |s: &Stuck<'_>| {
        stuck
            .lock()
            .unwrap()
            .push((s.label.to_string(), s.at_ms, s.running));
    };
    let ticks_during_hang = AtomicUsize::new(0);
    let hanging = AtomicBool::new(false);
    let tick = |_: &str, _: usize| {
        if hanging.load(Ordering::Acquire) {
            ticks_during_hang.fetch_add(1, Ordering::Relaxed);
        }
    };
    let hang = |_: &str, _: usize| {
        let _call = plugin_call();
        hanging.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_millis(800));
        hanging.store(false, Ordering::Release);
    };
    let peak = std::thread::scope(|scope| {
        let pool = Scheduler::start(
            scope,
            PoolConfig {
                stuck_after: Some(Duration::from_millis(100)),
                ..config(1)
            },
            &stop,
            Some(&report),
        );
        pool.submit(ticker("hang", 1, Duration::ZERO, &hang));
        // Give the hanging task the only worker first.
        std::thread::sleep(Duration::from_millis(20));
        pool.submit(ticker("tick", 30, Duration::from_millis(10), &tick));
        pool.wait_idle();
        pool.peak_threads()
    });
    let stuck = stuck.into_inner().unwrap();
    assert_eq!(stuck.len(), 1, "reported once per call: {stuck:?}");
    assert_eq!(stuck[0].0, "hang");
    assert_eq!(stuck[0].1, None, "a task without a clock of its own");
    assert!(stuck[0].2 >= Duration::from_millis(100), "{stuck:?}");
    // Without a substitute the ticker would not run at all while the only worker hangs; with
    // one it runs from about 100 ms on, every 10 ms, for the remaining ~700 ms.
    let during = ticks_during_hang.into_inner();
    assert!(during >= 20, "{during} ticks during the hang");
    // One worker, one substitute, the watchdog.
    assert_eq!(peak, 3);
}

/// A task on a clock of its own is reported stuck at the instant of the step it is in, not at
/// one it published before.
#[test]
fn a_stuck_report_carries_the_time_the_task_published() {
    let stop = AtomicBool::new(false);
    let stuck: Mutex<Vec<(String, Option<i64>)>> = Mutex::new(Vec::new());
    let report = |s: &Stuck<'_>| {
        stuck.lock().unwrap().push((s.label.to_string(), s.at_ms));
    };
    let time = TaskTime::new();
    let published = Arc::clone(&time);
    // Steps at 0, 60 000 and 120 000 ms of its clock; the second one hangs in a plugin call.
    let step = |_: &str, n: usize| {
        let at_ms = i64::try_from(n).unwrap() * 60_000;
        published.set(at_ms);
        if n == 1 {
            let _call = plugin_call();
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    std::thread::scope(|scope| {
        let pool = Scheduler::start(
            scope,
            PoolConfig {
                stuck_after: Some(Duration::from_millis(100)),
                ..config(1)
            },
            &stop,
            Some(&report),
        );
        pool.submit(Box::new(Ticker {
            name: "own-clock".to_string(),
            lane: Lane::Compute,
            steps: 3,
            done: 0,
            every: Duration::ZERO,
            body: &step,
            time: Some(time),
        }));
        pool.wait_idle();
    });
    let stuck = stuck.into_inner().unwrap();
    assert_eq!(stuck, [("own-clock".to_string(), Some(60_000))]);
}

#[test]
fn the_substitutes_are_bounded() {
    let stop = AtomicBool::new(false);
    let reported = AtomicUsize::new(0);
    let report = |_: &Stuck<'_>| {
        reported.fetch_add(1, Ordering::Relaxed);
    };
    let hang = |_: &str, _: usize| {
        let _call = plugin_call();
        std::thread::sleep(Duration::from_millis(500));
    };
    let peak = std::thread::scope(|scope| {
        let pool = Scheduler::start(
            scope,
            PoolConfig {
                stuck_after: Some(Duration::from_millis(50)),
                max_substitutes: 2,
                ..config(1)
            },
            &stop,
            Some(&report),
        );
        for i in 0..6 {
            pool.submit(ticker(&format!("hang{i}"), 1, Duration::ZERO, &hang));
        }
        pool.wait_idle();
        pool.peak_threads()
    });
    // At most 1 worker + 2 substitutes + the watchdog at once, however many tasks hang.
    assert!(peak <= 4, "{peak}");
    assert!(reported.into_inner() >= 3);
}

#[test]
fn thousands_of_tasks_run_on_the_configured_threads() {
    let stop = AtomicBool::new(false);
    let steps = AtomicUsize::new(0);
    let count = |_: &str, _: usize| {
        steps.fetch_add(1, Ordering::Relaxed);
    };
    let network_steps = AtomicUsize::new(0);
    let wait = |_: &str, _: usize| {
        std::thread::sleep(Duration::from_millis(2));
        network_steps.fetch_add(1, Ordering::Relaxed);
    };
    let peak = std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config(3), &stop, None);
        for i in 0..2000 {
            pool.submit(ticker(&i.to_string(), 5, Duration::from_millis(1), &count));
        }
        for i in 0..100 {
            pool.submit(Box::new(Ticker {
                name: format!("net{i}"),
                lane: Lane::Network,
                steps: 3,
                done: 0,
                every: Duration::from_millis(1),
                body: &wait,
                time: None,
            }));
        }
        pool.wait_idle();
        pool.peak_threads()
    });
    assert_eq!(steps.into_inner(), 2000 * 5);
    assert_eq!(network_steps.into_inner(), 100 * 3);
    // 3 compute workers and at most 4 request threads, not a thread per task.
    assert!(peak <= 3 + 4, "{peak}");
}

#[test]
fn the_stop_wakes_tasks_due_much_later() {
    let stop = AtomicBool::new(false);
    let seen = Arc::new(AtomicUsize::new(0));
    struct Waits<'a> {
        stop: &'a AtomicBool,
        seen: Arc<AtomicUsize>,
    }
    impl<'a> Task<'a> for Waits<'a> {
        fn step(&mut self, _: &mut Vec<BoxedTask<'a>>) -> Next {
            if self.stop.load(Ordering::Relaxed) {
                self.seen.fetch_add(1, Ordering::Relaxed);
                return Next::Done;
            }
            Next::At(Instant::now() + Duration::from_secs(3600))
        }
        fn lane(&self) -> Lane {
            Lane::Compute
        }
        fn label(&self) -> &str {
            "waits"
        }
        fn panicked(&mut self) {}
    }
    let started = Instant::now();
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config(2), &stop, None);
        for _ in 0..10 {
            pool.submit(Box::new(Waits {
                stop: &stop,
                seen: Arc::clone(&seen),
            }));
        }
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        pool.wait_idle();
    });
    assert_eq!(seen.load(Ordering::Relaxed), 10);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_panicking_step_ends_its_task_only() {
    let stop = AtomicBool::new(false);
    let steps = AtomicUsize::new(0);
    let body = |name: &str, step: usize| {
        if name == "bad" && step == 1 {
            panic!("a bad step");
        }
        steps.fetch_add(1, Ordering::Relaxed);
    };
    std::thread::scope(|scope| {
        let pool = Scheduler::start(scope, config(1), &stop, None);
        pool.submit(ticker("bad", 5, Duration::ZERO, &body));
        pool.submit(ticker("good", 5, Duration::ZERO, &body));
        pool.wait_idle();
    });
    // The bad task's first step, then the good task's five.
    assert_eq!(steps.into_inner(), 6);
}
