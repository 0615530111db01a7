//! `decision_cycle_serving`: what the HTTP server costs the decision loop, with 1,000 jobs of 20
//! vertices in the built-in BALANCED mode.
//!
//! Three settings run interleaved on the same fleet in one process, so that a noisy, shared
//! machine moves them alike: `without_server` (the cycle alone, as without `--listen`),
//! `recorded` (each step's report recorded into the server's view, as `run --listen` does, and
//! nobody scraping) and `scraped` (the same, while another thread fetches `/metrics` over HTTP
//! at a fixed interval, as Prometheus would). Each block runs every setting for a few rounds,
//! in a rotating order; a scrape still in flight when the `scraped` setting ends is waited for
//! before the next setting starts. Every round of every job is timed (the cycle, and apart from
//! it the recording); the medians and their ratios to `without_server` are printed.
//!
//! The scrape interval is `SERVING_SCRAPE_MS` (a comma-separated list, one pass each; default
//! `1000,100`: Prometheus' fastest usual rate, then ten times faster to make any effect
//! visible). At the end the latency of `/metrics` is measured with the loop idle: right after
//! a round of the whole fleet (every job changed) and with nothing changed since the previous
//! scrape.
//!
//! `cargo bench -p flowscale --bench decision_cycle -- decision_cycle_serving`

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use flowscale::plugins::PluginListing;
use flowscale::runner::CycleReport;
use flowscale::serve::{Backend, FleetView, ServeConfig, Server};

use super::*;

const JOBS: usize = 1_000;
const SAMPLES: u64 = 8;

/// What runs beside the decision cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Setting {
    /// Nothing: no server.
    WithoutServer,
    /// Every step recorded into the server's view; nobody scrapes.
    Recorded,
    /// Recorded, and `/metrics` scraped at the pass's interval.
    Scraped,
}

const SETTINGS: [Setting; 3] = [Setting::WithoutServer, Setting::Recorded, Setting::Scraped];

impl Setting {
    fn name(self) -> &'static str {
        match self {
            Setting::WithoutServer => "without_server",
            Setting::Recorded => "recorded",
            Setting::Scraped => "scraped",
        }
    }
}

/// One round of the fleet: the cycles, and the recording into the view.
#[derive(Clone, Copy, Default)]
struct RoundTime {
    cycle: Duration,
    record: Duration,
}

impl Fleet {
    /// One cycle of every job, each recorded into `view` if there is one, as `run --listen`
    /// does. Building the report is not timed: the loop builds it for its log anyway.
    fn serving_round(
        &mut self,
        opts: &AutoscalerOptions,
        aligner: &dyn Aligner,
        view: Option<&FleetView>,
        tally: &mut Tally,
    ) -> RoundTime {
        let mut time = RoundTime::default();
        for job in &mut self.jobs {
            job.advance(self.cycle);
            let start = Instant::now();
            let out = timed_cycle(job, opts, self.now, aligner, &self.custom);
            time.cycle += start.elapsed();
            if let Some(view) = view {
                let report = report_of(&job.name, self.now, &out);
                let start = Instant::now();
                view.record(&report);
                time.record += start.elapsed();
            }
            tally.add(&out);
            black_box(out);
        }
        self.cycle += 1;
        self.now += INTERVAL_MS;
        time
    }
}

/// The report of one cycle, as the loop builds it: with what the cycle evaluated (the
/// per-vertex gauges of `/metrics`), the job's interval and catch-up target, its cooldown and
/// how late the cycle started.
fn report_of(job: &str, now: i64, out: &CycleOutcome) -> CycleReport {
    let mut report = CycleReport::new(job, now);
    report.stage = Some(out.stage.clone());
    report.vertices = out.vertices.clone();
    report.events = out.events.clone();
    report.evaluated = out.evaluated.clone();
    report.decision_interval = Some(Duration::from_millis(INTERVAL_MS as u64));
    report.catch_up_target = Some(Duration::from_secs(300));
    report.cooldown_queued = Some(false);
    report.lateness = Some(Duration::from_millis(2));
    report.elapsed = Duration::from_micros(100);
    report
}

/// The server's plugin listing and `align` endpoint are not used here.
struct NoBackend;

impl Backend for NoBackend {
    fn plugins(&self) -> PluginListing {
        PluginListing::empty("plugins".into())
    }
    fn align(&self, _request: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
        Err(serde_json::Value::Null)
    }
}

/// `GET /metrics` over a fresh connection, read to its end; checks that it is a whole fleet's
/// text.
fn scrape(addr: SocketAddr) -> Duration {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("the server accepts");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("the request is sent");
    let mut body = Vec::new();
    stream.read_to_end(&mut body).expect("the answer is read");
    let took = start.elapsed();
    assert!(
        body.starts_with(b"HTTP/1.1 200") && body.len() > 1_000_000,
        "a scrape of the whole fleet: {} bytes{}",
        body.len(),
        if body.len() < 4096 {
            format!(":\n{}", String::from_utf8_lossy(&body))
        } else {
            String::new()
        }
    );
    took
}

/// A thread that scrapes `/metrics` on a fixed schedule, on the ticks when it is active.
struct Scraper {
    active: Arc<AtomicBool>,
    /// A scrape is in flight.
    busy: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    latencies: Arc<Mutex<Vec<Duration>>>,
    thread: Option<JoinHandle<()>>,
}

impl Scraper {
    fn start(addr: SocketAddr, every: Duration) -> Scraper {
        let active = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let (a, b, s, l) = (
            Arc::clone(&active),
            Arc::clone(&busy),
            Arc::clone(&stop),
            Arc::clone(&latencies),
        );
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            while !s.load(Ordering::Acquire) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(2)));
                    continue;
                }
                next += every;
                if next < now {
                    next = now + every;
                }
                b.store(true, Ordering::Release);
                if a.load(Ordering::Acquire) {
                    let took = scrape(addr);
                    l.lock().expect("latencies").push(took);
                }
                b.store(false, Ordering::Release);
            }
        });
        Scraper {
            active,
            busy,
            stop,
            latencies,
            thread: Some(thread),
        }
    }

    /// Scrapes from the next tick on, or stops scraping and waits for a scrape in flight.
    fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Release);
        if !active {
            while self.busy.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One pass: `blocks` blocks of every setting for `rounds` rounds each, scraping every `every`
/// in the `scraped` setting; prints the medians and ratios.
#[allow(clippy::too_many_arguments)]
fn pass(
    fleet: &mut Fleet,
    opts: &AutoscalerOptions,
    aligner: &dyn Aligner,
    view: &FleetView,
    addr: SocketAddr,
    every: Duration,
    (blocks, rounds): (usize, usize),
) {
    let scraper = Scraper::start(addr, every);
    let mut times: BTreeMap<Setting, Vec<RoundTime>> = BTreeMap::new();
    let mut tally = Tally::default();
    let mut scraped_for = Duration::ZERO;
    for block in 0..blocks {
        for i in 0..SETTINGS.len() {
            let setting = SETTINGS[(block + i) % SETTINGS.len()];
            scraper.set_active(setting == Setting::Scraped);
            let recorded = (setting != Setting::WithoutServer).then_some(view);
            let start = Instant::now();
            for _ in 0..rounds {
                let time = fleet.serving_round(opts, aligner, recorded, &mut tally);
                times.entry(setting).or_default().push(time);
            }
            if setting == Setting::Scraped {
                scraped_for += start.elapsed();
            }
        }
    }
    scraper.set_active(false);
    let latencies = std::mem::take(&mut *scraper.latencies.lock().expect("latencies"));
    drop(scraper);
    tally.assert_decides("decision_cycle_serving");

    eprintln!(
        "decision_cycle_serving: {JOBS} jobs x {VERTICES} vertices, /metrics every {} ms in \
         `scraped`; {blocks} blocks x {rounds} rounds per setting, interleaved",
        every.as_millis()
    );
    let base = median(
        times[&Setting::WithoutServer]
            .iter()
            .map(|t| t.cycle + t.record)
            .collect(),
    );
    for setting in SETTINGS {
        let rows = &times[&setting];
        let total = median(rows.iter().map(|t| t.cycle + t.record).collect());
        let cycle = median(rows.iter().map(|t| t.cycle).collect());
        let record = median(rows.iter().map(|t| t.record).collect());
        eprintln!(
            "  {:<15} round {:7.1} ms (cycles {:7.1} ms, recording {:5.1} ms)  {:.3}x",
            setting.name(),
            ms(total),
            ms(cycle),
            ms(record),
            total.as_secs_f64() / base.as_secs_f64()
        );
    }
    let count = latencies.len();
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    eprintln!(
        "  {count} scrapes in {:.1} s of `scraped`: median {:.1} ms, slowest {:.1} ms",
        scraped_for.as_secs_f64(),
        ms(median(latencies)),
        ms(slowest)
    );
    assert!(
        count > 0 || scraped_for < every,
        "the server was scraped while the cycles ran"
    );
}

/// `/metrics` latency with the loop idle: right after a round of the whole fleet, and with
/// nothing changed since the previous scrape.
fn latency(
    fleet: &mut Fleet,
    opts: &AutoscalerOptions,
    aligner: &dyn Aligner,
    view: &FleetView,
    addr: SocketAddr,
    times: usize,
) {
    let mut tally = Tally::default();
    let mut changed = Vec::new();
    let mut unchanged = Vec::new();
    for _ in 0..times {
        fleet.serving_round(opts, aligner, Some(view), &mut tally);
        changed.push(scrape(addr));
        unchanged.push(scrape(addr));
    }
    eprintln!(
        "decision_cycle_serving: GET /metrics of {JOBS} jobs x {VERTICES} vertices over HTTP \
         (median of {times}): {:.2} ms right after a round of every job, {:.2} ms unchanged",
        ms(median(changed)),
        ms(median(unchanged))
    );
}

/// The fleet with its window filled, and a server's view that knows its jobs.
fn filled_fleet(opts: &AutoscalerOptions, aligner: &dyn Aligner) -> (Fleet, FleetView) {
    let mut fleet = Fleet::new(JOBS);
    fleet.fill(opts, aligner, SAMPLES);
    let view = FleetView::new();
    for job in &fleet.jobs {
        view.add_job(&job.name, "sim", "BALANCED");
    }
    (fleet, view)
}

/// The measurement; `quick` (`--test`) runs one block of one round at one interval.
pub(crate) fn run(quick: bool) {
    let registry = ModeRegistry::default();
    let (_, aligner) = aligners_builtin(&registry);
    let aligner: &dyn Aligner = &aligner;
    let opts = options(SAMPLES);
    let (mut fleet, view) = filled_fleet(&opts, aligner);
    let view = Arc::new(view);
    let config = ServeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        api_token: None,
        api_token_file: None,
        tls: None,
    };
    let server =
        Server::start(&config, Arc::clone(&view), Arc::new(NoBackend)).expect("the server starts");
    let addr = server.local_addr();
    // Warm-up: the view holds every job's vertices, the text has been encoded once.
    let mut warm = Tally::default();
    fleet.serving_round(&opts, aligner, Some(&view), &mut warm);
    scrape(addr);

    let intervals = std::env::var("SERVING_SCRAPE_MS").unwrap_or_else(|_| "1000,100".into());
    let shape = if quick { (1, 1) } else { (8, 4) };
    for every in intervals.split(',') {
        let every: u64 = every
            .trim()
            .parse()
            .expect("SERVING_SCRAPE_MS: milliseconds, comma-separated");
        let every = Duration::from_millis(every);
        pass(&mut fleet, &opts, aligner, &view, addr, every, shape);
        if quick {
            break;
        }
    }
    latency(
        &mut fleet,
        &opts,
        aligner,
        &view,
        addr,
        if quick { 1 } else { 9 },
    );
}

/// A fixed workload for instruction counting, free of the machine's noise:
/// `SERVING_PROFILE=<rounds>` runs, after the warm-up, `rounds` times one round of the fleet
/// recorded into the view and one encoding of the `/metrics` text (every job changed, as a
/// scrape after a round finds it). Under `valgrind --tool=callgrind`, the inclusive counts of
/// [`timed_cycle`], [`recorded`] and [`rendered`] are a round's cycles, its recording and a
/// scrape's rendering (the HTTP write of the text is a system call, not counted).
pub(crate) fn profile(spec: &str) {
    let rounds: usize = spec.trim().parse().expect("SERVING_PROFILE is <rounds>");
    let registry = ModeRegistry::default();
    let (_, aligner) = aligners_builtin(&registry);
    let aligner: &dyn Aligner = &aligner;
    let opts = options(SAMPLES);
    let (mut fleet, view) = filled_fleet(&opts, aligner);
    let mut tally = Tally::default();
    fleet.profiled_round(&opts, aligner, &view, &mut tally);
    let mut bytes = rendered(&view);
    for _ in 0..rounds {
        fleet.profiled_round(&opts, aligner, &view, &mut tally);
        bytes = rendered(&view);
    }
    eprintln!("serving profile: {JOBS} jobs, {rounds} rounds, text of {bytes} bytes; {tally:?}");
}

impl Fleet {
    /// One round of every job, each cycle's report recorded through [`recorded`].
    fn profiled_round(
        &mut self,
        opts: &AutoscalerOptions,
        aligner: &dyn Aligner,
        view: &FleetView,
        tally: &mut Tally,
    ) {
        for job in &mut self.jobs {
            job.advance(self.cycle);
            let out = timed_cycle(job, opts, self.now, aligner, &self.custom);
            let report = report_of(&job.name, self.now, &out);
            recorded(view, &report);
            tally.add(&out);
        }
        self.cycle += 1;
        self.now += INTERVAL_MS;
    }
}

/// What the loop pays to publish one cycle (kept out of line for the profiler).
#[inline(never)]
fn recorded(view: &FleetView, report: &CycleReport) {
    view.record(report);
}

/// What a scrape after a change costs the server: the whole text encoded (kept out of line for
/// the profiler); its length.
#[inline(never)]
fn rendered(view: &FleetView) -> usize {
    black_box(view.metrics().encoded(false)).len()
}
