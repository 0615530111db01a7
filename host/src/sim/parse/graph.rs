//! The job graph's algorithms: topological order, reachability and the bodies of iterations.

use crate::sim::spec::{EdgeSpec, FeedbackSpec, VertexSpec};

/// Kahn's algorithm; `None` on a cycle. Ties go to the lower index, so the order is stable.
pub(super) fn topological_order(n: usize, edges: &[EdgeSpec]) -> Option<Vec<usize>> {
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.to] += 1;
    }
    let mut order = Vec::with_capacity(n);
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for e in edges.iter().filter(|e| e.from == v) {
            indegree[e.to] -= 1;
            if indegree[e.to] == 0 {
                ready.insert(e.to);
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// Whether `to` can be reached from `from` along edges.
pub(super) fn reaches(edges: &[EdgeSpec], from: usize, to: usize) -> bool {
    let mut stack = vec![from];
    let mut seen = vec![from];
    while let Some(v) = stack.pop() {
        if v == to {
            return true;
        }
        for e in edges.iter().filter(|e| e.from == v) {
            if !seen.contains(&e.to) {
                seen.push(e.to);
                stack.push(e.to);
            }
        }
    }
    false
}

/// The iteration heads, each once, in index order.
pub(super) fn heads(feedback: &[FeedbackSpec]) -> Vec<usize> {
    let mut heads: Vec<usize> = feedback.iter().map(|f| f.to).collect();
    heads.sort_unstable();
    heads.dedup();
    heads
}

/// Vertices on a path from `head` to one of its tails.
pub(super) fn loop_body(
    n: usize,
    edges: &[EdgeSpec],
    feedback: &[FeedbackSpec],
    head: usize,
) -> Vec<bool> {
    let tails: Vec<usize> = feedback
        .iter()
        .filter(|f| f.to == head)
        .map(|f| f.from)
        .collect();
    (0..n)
        .map(|v| reaches(edges, head, v) && tails.iter().any(|&t| reaches(edges, v, t)))
        .collect()
}

/// The vertices in `order` (a topological order), with edge and feedback endpoints remapped to
/// the new indices.
pub(super) fn in_topological_order(
    order: &[usize],
    vertices: Vec<VertexSpec>,
    edges: Vec<EdgeSpec>,
    feedback: Vec<FeedbackSpec>,
) -> (Vec<VertexSpec>, Vec<EdgeSpec>, Vec<FeedbackSpec>) {
    let mut new_index = vec![0; vertices.len()];
    for (new, old) in order.iter().enumerate() {
        new_index[*old] = new;
    }
    let vertices: Vec<VertexSpec> = order.iter().map(|&o| vertices[o].clone()).collect();
    let edges = edges
        .into_iter()
        .map(|e| EdgeSpec {
            from: new_index[e.from],
            to: new_index[e.to],
            ..e
        })
        .collect();
    let feedback = feedback
        .into_iter()
        .map(|f| FeedbackSpec {
            from: new_index[f.from],
            to: new_index[f.to],
            ..f
        })
        .collect();
    (vertices, edges, feedback)
}
