//! Flink's key-group assignment (`KeyGroupRangeAssignment`): which subtask of a keyed vertex
//! owns which key groups. One definition for the simulator, which routes records by it, and
//! for skew-aware targets, which predict the busiest subtask by it
//! (docs/skew-aware.md#key-group-ranges).

/// Flink's `computeOperatorIndexForKeyGroup`: the subtask (of `parallelism`) that owns key group
/// `key_group` (of `max_parallelism`).
pub(crate) fn operator_index_for_key_group(
    max_parallelism: u32,
    parallelism: u32,
    key_group: u32,
) -> u32 {
    (u64::from(key_group) * u64::from(parallelism) / u64::from(max_parallelism)) as u32
}

/// Flink's `computeKeyGroupRangeForOperatorIndex`: subtask `index` of `parallelism` owns key
/// groups `[ceil(i*K/p), ceil((i+1)*K/p))`, returned as a half-open range.
pub(crate) fn key_group_range(
    max_parallelism: u32,
    parallelism: u32,
    index: u32,
) -> std::ops::Range<u32> {
    let (k, p, i) = (
        u64::from(max_parallelism),
        u64::from(parallelism.max(1)),
        u64::from(index),
    );
    let start = (i * k).div_ceil(p);
    let end = ((i + 1) * k).div_ceil(p);
    start as u32..end as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_group_ranges_match_flink() {
        // K=128, p=24: 8 subtasks hold 6 groups, 16 hold 5 (alignment.md, "Why it matters").
        let sizes: Vec<u32> = (0..24)
            .map(|i| key_group_range(128, 24, i).len() as u32)
            .collect();
        assert_eq!(sizes.iter().filter(|&&s| s == 6).count(), 8);
        assert_eq!(sizes.iter().filter(|&&s| s == 5).count(), 16);
        assert_eq!(sizes.iter().sum::<u32>(), 128);
        // p = 3: [0, 43), [43, 86), [86, 128): ceil(128/3) = 43, ceil(256/3) = 86.
        assert_eq!(key_group_range(128, 3, 0), 0..43);
        assert_eq!(key_group_range(128, 3, 1), 43..86);
        assert_eq!(key_group_range(128, 3, 2), 86..128);
        for p in 1..=128 {
            for kg in 0..128 {
                let i = operator_index_for_key_group(128, p, kg);
                assert!(key_group_range(128, p, i).contains(&kg), "p={p} kg={kg}");
            }
        }
    }
}
