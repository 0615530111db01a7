//! Host side: a number that names one job graph, so that a plugin can tell "the graph I copied
//! last time" without comparing it field by field (SDK 0.1.2).
//!
//! The host hands each distinct shared graph (`Arc<JobTopology>`) it lends a generation from
//! one process-wide counter that only counts up, and hands the same generation again whenever
//! it lends the very same graph, for as long as that graph lives. The promise a plugin relies
//! on is one way only: **equal generations mean equal graphs.** It holds because
//!
//! * a generation is handed out for one graph only (the counter never repeats a number, across
//!   threads too), and
//! * "the very same graph" is decided by address while this module holds a weak reference to
//!   it: a weak reference keeps the allocation, so no other graph can be placed at that
//!   address, and it cannot be changed either (`Arc::get_mut` refuses while a weak reference
//!   exists, and `Arc::make_mut` moves the graph to a new allocation instead).
//!
//! A host keeps each job's graph across decision cycles while the job's graph stays the same,
//! and lends it for every aligned vertex of the job, job after job: so each graph keeps its
//! generation for as long as the host keeps it, and the plugin reuses its copy of every job's
//! graph without comparing it. Equal graphs may still have different generations (a graph the
//! host built anew, or the same graph lent from another thread): the plugin then compares once
//! and keeps its copy. Each thread numbers the graphs it lends on its own; the weak references
//! of graphs that were dropped are let go from time to time, so what is kept follows the
//! number of live graphs (a few words each; a dropped graph's contents are freed at once).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use crate::context::JobTopology;

/// The last generation handed out; 0 is never one ("unknown" on the wire).
static LAST_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Below this many numbered graphs a thread does not look for dropped ones.
const FIRST_SWEEP: usize = 64;

thread_local! {
    /// The graphs this thread has lent.
    static LENT: RefCell<Numbered> = RefCell::new(Numbered::default());
}

/// The graphs one thread has lent, by address, with their generations.
#[derive(Default)]
struct Numbered {
    /// Each graph's address, a weak reference that keeps the address its own, and its
    /// generation.
    by_address: HashMap<usize, (Weak<JobTopology>, u64), BuildHasherDefault<AddressHasher>>,
    /// The entry of `by_address` found last (address and generation): the vertices of a job
    /// are lent one after the other with the same graph, so most look-ups stop here. Only set
    /// while that entry is in `by_address`, which keeps the address its graph's.
    last: Option<(usize, u64)>,
    /// The size of `by_address` at which the entries of dropped graphs are let go.
    sweep_at: usize,
}

impl Numbered {
    /// The generation of `graph`, numbering it when this thread has not lent it before.
    fn of(&mut self, graph: &Arc<JobTopology>) -> u64 {
        let address = Arc::as_ptr(graph) as usize;
        match self.last {
            Some((last, generation)) if last == address => return generation,
            _ => {}
        }
        let generation = match self.by_address.get(&address) {
            // Held by the entry's weak reference, the address is still this graph's.
            Some((_, generation)) => *generation,
            None => {
                self.sweep();
                let generation = LAST_GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
                self.by_address
                    .insert(address, (Arc::downgrade(graph), generation));
                generation
            }
        };
        self.last = Some((address, generation));
        generation
    }

    /// Lets go of the graphs that were dropped, once enough entries came since the last time
    /// that the sweep costs little per entry.
    fn sweep(&mut self) {
        if self.by_address.len() < self.sweep_at.max(FIRST_SWEEP) {
            return;
        }
        self.by_address
            .retain(|_, (graph, _)| graph.strong_count() > 0);
        self.sweep_at = 2 * self.by_address.len();
        // The last entry may have gone with them, and with it what kept its address.
        self.last = None;
    }
}

/// Hashes an address: spreads its bits (allocations are aligned, so the low ones are zero).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Addresses come through `write_usize`; anything else is mixed in byte by byte.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

/// The generation of a lent job graph.
pub(super) struct GraphGeneration;

impl GraphGeneration {
    /// The generation of `graph`: the one it was given when this thread first lent it, as long
    /// as it lives; a new one for a graph this thread has not lent. 0 ("unknown": the plugin
    /// compares) only while the thread is being torn down.
    pub(super) fn of(graph: &Arc<JobTopology>) -> u64 {
        LENT.try_with(|lent| match lent.try_borrow_mut() {
            Ok(mut lent) => lent.of(graph),
            Err(_) => 0,
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
    }

    /// A host lends the graphs of many jobs in turn, cycle after cycle: each keeps its number
    /// however many other graphs were lent in between.
    #[test]
    fn a_graph_keeps_its_generation_while_others_are_lent() {
        let graphs: Vec<_> = (0..3 * FIRST_SWEEP)
            .map(|i| graph(&format!("v{i}")))
            .collect();
        let first: Vec<u64> = graphs.iter().map(GraphGeneration::of).collect();
        for round in 0..3 {
            // Graphs built and dropped in between (new graphs of other jobs) change nothing.
            for i in 0..FIRST_SWEEP {
                GraphGeneration::of(&graph(&format!("gone{round}-{i}")));
            }
            let again: Vec<u64> = graphs.iter().map(GraphGeneration::of).collect();
            assert_eq!(again, first, "round {round}");
        }
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), first.len());
    }

    /// The entries of dropped graphs are let go of: what a thread keeps follows the graphs
    /// that live, not all it ever lent.
    #[test]
    fn the_entries_of_dropped_graphs_are_let_go() {
        let kept = graph("kept");
        let generation = GraphGeneration::of(&kept);
        for i in 0..20 * FIRST_SWEEP {
            GraphGeneration::of(&graph(&format!("v{i}")));
        }
        let entries = LENT.with(|lent| lent.borrow().by_address.len());
        assert!(entries <= 2 * FIRST_SWEEP, "{entries} entries kept");
        assert_eq!(GraphGeneration::of(&kept), generation);
    }

    /// A graph the host dropped cannot lend its generation to a graph that happens to be
    /// allocated at the same address: the weak reference holds the address meanwhile.
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
