//! Host side: a number that names one job graph, so that a plugin can tell "the graph I copied
//! last time" without comparing it field by field (SDK 0.1.2).
//!
//! The host hands each distinct shared graph (`Arc<JobTopology>`) it lends a generation from
//! one process-wide counter that only counts up, and hands the same generation again while it
//! keeps lending the very same graph. The promise a plugin relies on is one way only: **equal
//! generations mean equal graphs.** It holds because
//!
//! * a generation is handed out for one graph only (the counter never repeats a number, across
//!   threads too), and
//! * "the very same graph" is decided by pointer while this module holds a strong reference to
//!   it, so the allocation can be neither freed and reused by another graph nor changed (a
//!   shared `Arc` cannot be mutated).
//!
//! Equal graphs may have different generations (the host builds a fresh graph each decision
//! cycle): the plugin then compares once and keeps its copy. Each thread remembers the last
//! graph it lent, which is what the host's pattern needs (the vertices of a job are aligned one
//! after the other on one thread, with one shared graph) and keeps one graph per thread alive
//! at most.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::JobTopology;

/// The last generation handed out; 0 is never one ("unknown" on the wire).
static LAST_GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The graph this thread lent last, held so that its address stays its own, and its
    /// generation.
    static LENT: RefCell<Option<(Arc<JobTopology>, u64)>> = const { RefCell::new(None) };
}

/// The generation of a lent job graph.
pub(super) struct GraphGeneration;

impl GraphGeneration {
    /// The generation of `graph`: the same as last time on this thread when it is the same
    /// shared graph, a new one otherwise. 0 ("unknown": the plugin compares) only while the
    /// thread is being torn down.
    pub(super) fn of(graph: &Arc<JobTopology>) -> u64 {
        LENT.try_with(|lent| {
            let Ok(mut lent) = lent.try_borrow_mut() else {
                return 0;
            };
            match &*lent {
                Some((kept, generation)) if Arc::ptr_eq(kept, graph) => *generation,
                _ => {
                    let generation = LAST_GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
                    *lent = Some((Arc::clone(graph), generation));
                    generation
                }
            }
        })
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::TopologyVertex;

    fn graph(id: &str) -> Arc<JobTopology> {
        Arc::new(JobTopology {
            vertices: vec![TopologyVertex {
                id: id.into(),
                name: "map".into(),
                parallelism: 2,
                max_parallelism: 128,
                source_partitions: 0,
            }],
            edges: Vec::new(),
        })
    }

    #[test]
    fn the_same_shared_graph_keeps_its_generation() {
        let a = graph("a");
        let first = GraphGeneration::of(&a);
        assert_ne!(first, 0);
        assert_eq!(GraphGeneration::of(&Arc::clone(&a)), first);
    }

    #[test]
    fn another_graph_gets_a_new_generation_even_when_equal() {
        let (a, b) = (graph("a"), graph("b"));
        let (ga, gb) = (GraphGeneration::of(&a), GraphGeneration::of(&b));
        assert_ne!(ga, gb);
        // An equal graph in another allocation is another graph to this module.
        let a_again = graph("a");
        let g_again = GraphGeneration::of(&a_again);
        assert_ne!(g_again, ga);
        assert_ne!(g_again, gb);
        // Going back to the first graph after another one does not bring its number back:
        // numbers are never reused, so a plugin that kept `ga` cannot be misled.
        let back = GraphGeneration::of(&a);
        assert!(back > g_again, "{back} after {g_again}");
    }

    /// A graph the host dropped cannot lend its generation to a graph that happens to be
    /// allocated at the same address: the generation holds the graph until another one comes.
    #[test]
    fn a_dropped_graph_does_not_hand_its_generation_to_the_next_one() {
        let mut seen = Vec::new();
        for i in 0..64 {
            let g = graph(&format!("v{i}"));
            seen.push(GraphGeneration::of(&g));
            drop(g);
        }
        let mut distinct = seen.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            seen.len(),
            "a generation was handed out twice"
        );
    }

    /// Each thread keeps its own last graph, but the numbers come from one counter: a plugin
    /// that caches across threads cannot take one thread's graph for another's.
    #[test]
    fn generations_are_distinct_across_threads() {
        let here = GraphGeneration::of(&graph("a"));
        let other = std::thread::spawn(|| GraphGeneration::of(&graph("b")))
            .join()
            .expect("the thread runs");
        assert_ne!(here, other);
    }
}
