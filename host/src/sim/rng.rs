//! The simulator's seeded random numbers.
//!
//! A fixed, hand-written generator (SplitMix64) rather than `rand`'s `StdRng`: `StdRng` may change
//! algorithm between `rand` releases, and a simulated run must give the same numbers for the same
//! seed on every build, forever, or recorded comparisons stop being comparable.

/// SplitMix64 (Steele, Lea and Flood): 64 bits of state, passes BigCrush, trivially portable.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// An independent stream derived from this seed and a label (e.g. an edge index), so that
    /// adding a vertex does not shift the numbers every other vertex sees.
    pub(crate) fn derive(seed: u64, label: u64) -> SplitMix64 {
        let mut mixer = SplitMix64::new(seed ^ label.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let state = mixer.next_u64();
        SplitMix64 { state }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` (53 random bits).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `[0, bound)`; `bound` must be positive.
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        // Multiply-shift: unbiased enough for shuffles of a few thousand items.
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }

    /// Fisher-Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_first_outputs_for_seed_zero() {
        // Reference values of SplitMix64 for seed 0 (as published with the algorithm).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn floats_are_in_unit_interval_and_derived_streams_differ() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = rng.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
        let a = SplitMix64::derive(7, 1).next_u64();
        let b = SplitMix64::derive(7, 2).next_u64();
        assert_ne!(a, b);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<u32> = (0..100).collect();
        SplitMix64::new(3).shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_ne!(items, sorted);
    }
}
