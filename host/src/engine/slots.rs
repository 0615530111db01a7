//! How many task slots a job's parallelism takes, as Flink's scheduler places it: the vertices
//! of one slot-sharing group share slots, so a group takes as many slots as its widest vertex,
//! and the job the sum over its groups. What the slot arbiter compares with a cluster's free
//! slots (docs/flink.md#free-slots).
//!
//! A vertex whose group the engine does not report (Flink before 1.19) is in the default
//! group with every other such vertex: Flink puts every vertex in one group unless the job
//! says otherwise.

use std::collections::BTreeMap;

/// The slots of `parallelism` (vertex id -> parallelism), the vertices grouped by `group_of`.
pub(crate) fn slots_needed<'p, 'g>(
    parallelism: impl IntoIterator<Item = (&'p String, &'p u32)>,
    group_of: impl Fn(&str) -> Option<&'g str>,
) -> u32 {
    let mut widest: BTreeMap<Option<&'g str>, u32> = BTreeMap::new();
    for (vertex, &p) in parallelism {
        let w = widest.entry(group_of(vertex)).or_insert(0);
        *w = (*w).max(p);
    }
    widest
        .values()
        .fold(0u32, |total, &w| total.saturating_add(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(list: &[(&str, u32)]) -> BTreeMap<String, u32> {
        list.iter().map(|(v, p)| (v.to_string(), *p)).collect()
    }

    #[test]
    fn each_group_takes_its_widest_vertex_and_the_groups_add_up() {
        let p = map(&[("src", 2), ("map", 6), ("sink", 3), ("heavy", 4)]);
        let groups: BTreeMap<&str, &str> = [("src", "a"), ("map", "a"), ("sink", "b")]
            .into_iter()
            .collect();
        // a: max(2, 6) = 6; b: 3; `heavy` has no group: the default group, alone here: 4.
        assert_eq!(slots_needed(&p, |v| groups.get(v).copied()), 6 + 3 + 4);
        // One group (Flink's default): the widest vertex.
        assert_eq!(slots_needed(&p, |_| None), 6);
        assert_eq!(slots_needed(&BTreeMap::new(), |_| None), 0);
    }
}
