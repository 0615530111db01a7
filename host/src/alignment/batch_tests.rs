//! A job's vertices aligned together ([`Aligner::align_all`]): a mode that answers a batch in
//! one call gives each vertex exactly what its own call would, and a batch that fails as a
//! whole is each vertex's fault.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flowscale_sdk::{AlignmentContext, ModeError, ModeParams, ShipStrategy};

use super::*;
use crate::config::config_map as config;
use crate::events::EventReason;

/// Rounds the target up to a multiple of 4; does not apply to vertices named `skip…`, fails
/// for a vertex named `fail`, answers out of range for one named `huge`. Answers batches when
/// `batched`, counting its calls.
struct Fours {
    batched: bool,
    /// What `aligns_many` says: `batched`, unless a test makes it offer batches it declines.
    offers_batches: bool,
    batches: AtomicUsize,
    singles: AtomicUsize,
}

impl Fours {
    fn new(batched: bool) -> Fours {
        Fours {
            batched,
            offers_batches: batched,
            batches: AtomicUsize::new(0),
            singles: AtomicUsize::new(0),
        }
    }
    fn gate(ctx: &AlignmentContext) -> Result<bool, ModeError> {
        Ok(!ctx.vertex_name().starts_with("skip"))
    }
    fn answer(ctx: &AlignmentContext) -> Result<u32, ModeError> {
        match ctx.vertex_name() {
            "fail" => Err(ModeError::new("no multiple of 4 for this one")),
            "huge" => Ok(100_000),
            _ => Ok(ctx.target_parallelism().div_ceil(4) * 4),
        }
    }
}

impl HostMode for Fours {
    fn is_applicable(&self, ctx: &AlignmentContext) -> Result<bool, ModeError> {
        self.singles.fetch_add(1, Ordering::Relaxed);
        Fours::gate(ctx)
    }
    fn align(&self, ctx: &AlignmentContext) -> Result<u32, ModeError> {
        self.singles.fetch_add(1, Ordering::Relaxed);
        Fours::answer(ctx)
    }
    fn validate(&self, _: &ModeParams) -> Result<(), ModeError> {
        Ok(())
    }
    fn aligns_many(&self) -> bool {
        self.offers_batches
    }
    fn align_many(
        &self,
        ctxs: &[&AlignmentContext],
    ) -> Option<Vec<Result<GatedAnswer, ModeError>>> {
        if !self.batched {
            return None;
        }
        self.batches.fetch_add(1, Ordering::Relaxed);
        Some(
            ctxs.iter()
                .map(|ctx| {
                    let Ok(answer) = gate_then_align::<Infallible>(
                        ctx,
                        || Ok(Fours::gate(ctx)),
                        || Ok(Fours::answer(ctx)),
                    );
                    answer
                })
                .collect(),
        )
    }
}

/// A job aligned by `mode` (selected as `mine`, implementation `m`).
fn job_with(mode: Arc<dyn HostMode>) -> JobAlignment {
    let catalog = Single(CustomMode {
        id: "m".into(),
        description: String::new(),
        origin: ModeOrigin::Linked,
        mode,
    });
    let cfg = config(&[
        ("scaling.alignment.mode", "mine"),
        ("scaling.alignment.mode.mine.class", "m"),
    ]);
    JobAlignment::resolve("job", &cfg, &catalog).expect("resolves")
}

struct Single(CustomMode);

impl ModeCatalog for Single {
    fn find(&self, id: &str) -> Option<CustomMode> {
        (id == self.0.id).then(|| self.0.clone())
    }
    fn ids(&self) -> Vec<String> {
        vec![self.0.id.clone()]
    }
}

/// A keyed vertex named `name` scaling from `current` to `target` over 128 key groups.
fn request(name: &str, current: u32, target: u32) -> AlignmentRequest {
    let mut r = AlignmentRequest::new(current, target, 128);
    r.job = "job".into();
    r.vertex_id = format!("id-{name}").into();
    r.vertex_name = name.into();
    r.upper_limit = 200;
    r.input_ship_strategies = [ShipStrategy::Hash].into();
    r
}

/// Every kind of answer: aligned, not applicable, nothing to align, a failure, a refused one.
fn mixed() -> Vec<AlignmentRequest> {
    vec![
        request("a", 8, 13),
        request("skip-me", 8, 13),
        request("same", 8, 8),
        request("fail", 8, 10),
        request("huge", 8, 10),
        request("b", 16, 17),
    ]
}

#[test]
fn a_batch_gives_each_vertex_what_its_own_call_gives() {
    let batched = Arc::new(Fours::new(true));
    let single = Arc::new(Fours::new(false));
    let got = job_with(Arc::clone(&batched) as Arc<dyn HostMode>).align_all(mixed());
    let job = job_with(Arc::clone(&single) as Arc<dyn HostMode>);
    let expected: Vec<AlignOutcome> = mixed().into_iter().map(|r| job.align(r)).collect();
    assert_eq!(got, expected);
    assert_eq!(batched.batches.load(Ordering::Relaxed), 1, "one call");
    assert_eq!(batched.singles.load(Ordering::Relaxed), 0);
    // The outcomes are worth comparing: 13 -> 16, the target kept, faults for two vertices.
    let answers: Vec<u32> = got.iter().map(|o| o.parallelism).collect();
    assert_eq!(answers, vec![16, 13, 8, 10, 10, 20]);
    assert!(!got[1].applicable);
    let faults: Vec<usize> = (0..got.len())
        .filter(|&i| {
            got[i]
                .events
                .iter()
                .any(|e| e.reason == EventReason::PluginFault)
        })
        .collect();
    assert_eq!(faults, vec![3, 4]);
    // Without batches the calls are made one by one, as `align` makes them.
    let fallback = job.align_all(mixed());
    assert_eq!(fallback, expected);
    assert_eq!(single.batches.load(Ordering::Relaxed), 0);
}

#[test]
fn a_mode_that_declines_the_batch_it_offered_is_called_vertex_by_vertex() {
    // As a plugin worker that stopped batching between the question and the call.
    let unsure = Arc::new(Fours {
        offers_batches: true,
        ..Fours::new(false)
    });
    let got = job_with(Arc::clone(&unsure) as Arc<dyn HostMode>).align_all(mixed());
    let job = job_with(Arc::new(Fours::new(false)));
    let expected: Vec<AlignOutcome> = mixed().into_iter().map(|r| job.align(r)).collect();
    assert_eq!(got, expected);
    assert!(unsure.singles.load(Ordering::Relaxed) > 0);
}

/// A mode whose batch call fails as a whole, as a plugin worker that dies mid-batch does.
struct Broken(&'static str);

impl HostMode for Broken {
    fn is_applicable(&self, _: &AlignmentContext) -> Result<bool, ModeError> {
        panic!("a batching mode is not called vertex by vertex")
    }
    fn align(&self, _: &AlignmentContext) -> Result<u32, ModeError> {
        panic!("a batching mode is not called vertex by vertex")
    }
    fn validate(&self, _: &ModeParams) -> Result<(), ModeError> {
        Ok(())
    }
    fn aligns_many(&self) -> bool {
        true
    }
    fn align_many(
        &self,
        ctxs: &[&AlignmentContext],
    ) -> Option<Vec<Result<GatedAnswer, ModeError>>> {
        match self.0 {
            "died" => Some(vec![
                Err(ModeError::new(
                    "the plugin worker died during align: killed by SIGSEGV"
                ));
                ctxs.len()
            ]),
            "short" => Some(vec![Ok(GatedAnswer::Aligned(12))]),
            _ => panic!("the batch call itself panicked"),
        }
    }
}

#[test]
fn a_batch_that_fails_as_a_whole_is_each_vertex_fault() {
    let requests = || vec![request("a", 8, 11), request("b", 8, 13), request("c", 4, 6)];
    for (how, says) in [
        ("died", "killed by SIGSEGV"),
        ("panics", "panicked: the batch call itself panicked"),
    ] {
        let out = job_with(Arc::new(Broken(how))).align_all(requests());
        assert_eq!(out.len(), 3);
        for (o, r) in out.iter().zip(requests()) {
            assert_eq!(o.parallelism, r.target, "{how}: the target is kept");
            assert_eq!(o.events.len(), 1, "{how}: {:?}", o.events);
            let event = &o.events[0];
            assert_eq!(event.reason, EventReason::PluginFault);
            assert_eq!(event.vertex.as_deref(), Some(&*r.vertex_id));
            assert!(
                event.message.contains(says)
                    && event
                        .message
                        .ends_with(&format!("using the computed target {}", r.target)),
                "{how}: {}",
                event.message
            );
        }
    }
    // Answers missing from a batch are faults of their vertices; the answered one stands.
    let out = job_with(Arc::new(Broken("short"))).align_all(requests());
    assert_eq!(out[0].parallelism, 12);
    assert!(out[0].events.is_empty());
    for o in &out[1..] {
        assert_eq!(o.events[0].reason, EventReason::PluginFault);
        assert!(o.events[0].message.contains("no answer"), "{:?}", o.events);
    }
}

/// Says it is quarantined; must not be called.
struct Down;

impl HostMode for Down {
    fn is_applicable(&self, _: &AlignmentContext) -> Result<bool, ModeError> {
        panic!("a quarantined mode is not called")
    }
    fn align(&self, _: &AlignmentContext) -> Result<u32, ModeError> {
        panic!("a quarantined mode is not called")
    }
    fn validate(&self, _: &ModeParams) -> Result<(), ModeError> {
        Ok(())
    }
    fn unavailable(&self) -> Option<String> {
        Some("plugin mode `m` is quarantined".into())
    }
    fn align_many(&self, _: &[&AlignmentContext]) -> Option<Vec<Result<GatedAnswer, ModeError>>> {
        panic!("a quarantined mode is not called")
    }
}

#[test]
fn an_unavailable_mode_aligns_each_vertex_of_the_batch_with_balanced() {
    let requests = vec![request("a", 16, 24), request("b", 8, 13)];
    let balanced = JobAlignment::resolve(
        "job",
        &config(&[("scaling.alignment.mode", "BALANCED")]),
        &NoCustomModes,
    )
    .expect("resolves");
    let out = job_with(Arc::new(Down)).align_all(requests.clone());
    for (o, r) in out.iter().zip(requests) {
        assert_eq!(&*o.mode, "BALANCED");
        assert_eq!(o.parallelism, balanced.align(r).parallelism);
        assert_eq!(o.events[0].reason, EventReason::ModeFallback);
        assert!(o.events[0].message.contains("quarantined"));
    }
    // 16 -> 24 over 128 key groups: 26, as in the first worked example.
    assert_eq!(out[0].parallelism, 26);
}
