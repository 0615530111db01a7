//! The order and equality of the short strings a context is made of (metric names), eight bytes at a time.
//!
//! Building a context checks that its metric names are sorted: for names of a few dozen bytes
//! a call to `memcmp` per pair costs more than the comparison itself.

/// `a < b`, in the order of `str` (bytewise, a prefix first).
#[inline]
pub(crate) fn before(a: &[u8], b: &[u8]) -> bool {
    order(a, b).is_lt()
}

/// The order of `a` and `b` as `str` orders them (bytewise, a prefix first), eight bytes at a
/// time: for sorting checks and binary searches by name, without a call to `memcmp` per step.
#[inline]
pub(crate) fn order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let (mut x, mut y) = (a, b);
    while let (Some((p, rest_x)), Some((q, rest_y))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if p != q {
            return u64::from_be_bytes(*p).cmp(&u64::from_be_bytes(*q));
        }
        (x, y) = (rest_x, rest_y);
    }
    match x.iter().zip(y).find(|(p, q)| p != q) {
        Some((p, q)) => p.cmp(q),
        None => x.len().cmp(&y.len()),
    }
}

/// `a == b`, eight bytes at a time (for the same reason): whole words up to the last eight
/// bytes, then those (overlapping the words before when the length is not a multiple of
/// eight); shorter texts four bytes at a time the same way.
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let (mut x, mut y) = (a, b);
        while x.len() > 8 {
            match (x.split_first_chunk::<8>(), y.split_first_chunk::<8>()) {
                (Some((p, rest_x)), Some((q, rest_y))) => {
                    if p != q {
                        return false;
                    }
                    (x, y) = (rest_x, rest_y);
                }
                _ => break,
            }
        }
        return a.last_chunk::<8>() == b.last_chunk::<8>();
    }
    if n >= 4 {
        return a.first_chunk::<4>() == b.first_chunk::<4>()
            && a.last_chunk::<4>() == b.last_chunk::<4>();
    }
    a.iter().zip(b).all(|(p, q)| p == q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_agrees_with_the_order_of_str() {
        let words = [
            "",
            "A",
            "B",
            "LAG",
            "LOAD",
            "NUM_RECORDS_IN",
            "NUM_RECORDS_IN_PER_SECOND",
            "NUM_RECORDS_OUT",
            "NUM_SOURCE_PARTITIONS",
            "TRUE_PROCESSING_RATE",
            "TRUE_PROCESSING_RATF",
            "TRUE_PROCESSING_RAT",
            "12345678",
            "123456789",
            "12345679",
            "1234567",
            "cafébabe",
            "caféBabe",
            "ü",
            "\u{7f}\u{80}",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
        ];
        for a in words {
            for b in words {
                assert_eq!(before(a.as_bytes(), b.as_bytes()), a < b, "{a:?} < {b:?}");
                assert_eq!(
                    order(a.as_bytes(), b.as_bytes()),
                    a.cmp(b),
                    "{a:?} <=> {b:?}"
                );
                assert_eq!(same(a.as_bytes(), b.as_bytes()), a == b, "{a:?} == {b:?}");
            }
        }
    }
}
