//! "Did you mean": the closest known name to a misspelt one.

/// The candidate closest to `name` by edit distance (case-insensitive), if it is close enough
/// to be a plausible typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&name, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The candidate `name` is a plausible misspelling of, by a stricter rule than [`closest`]:
/// at most one edit (ignoring case; swapping two neighbours counts as one edit) for names shorter than 10 characters, at most two for
/// longer ones. Being called a typo makes a key an error, so the rule must never catch an
/// unrelated key that merely looks alike (a Flink key such as `pipeline.max-parallelism` is
/// eight edits from `vertex.max-parallelism`, which the lenient rule of [`closest`] would
/// accept for a name that long). A name equal to a candidate is no typo.
pub(crate) fn typo_of<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let length = lower.chars().count();
    let most = if length < 10 { 1 } else { 2 };
    candidates
        .into_iter()
        .filter(|c| *c != name)
        // No fewer edits than the lengths differ: most candidates are ruled out without the
        // full distance, which keeps checking the keys of a large file cheap.
        .filter(|c| c.chars().count().abs_diff(length) <= most)
        .map(|c| (typo_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance where swapping two adjacent characters is one edit (optimal string alignment),
/// since swapped letters are among the most common typos.
fn typo_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_plausible_typos_only() {
        let known = ["bucket-align", "slot-align", "BALANCED"];
        assert_eq!(closest("bucket-allign", known), Some("bucket-align"));
        assert_eq!(closest("balanced", known), Some("BALANCED"));
        assert_eq!(closest("zzzzzzzz", known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn typos_are_one_edit_for_short_names_and_two_for_long_ones() {
        let known = ["host", "vertex.max-parallelism"];
        assert_eq!(typo_of("hots", known), Some("host"), "a swap is one edit");
        assert_eq!(typo_of("hoots", known), None, "two edits in a short name");
        assert_eq!(typo_of("hst", known), Some("host"));
        assert_eq!(typo_of("Host", known), Some("host"), "case differs");
        assert_eq!(typo_of("host", known), None, "exact is no typo");
        assert_eq!(
            typo_of("vertex.max-paralelism", known),
            Some("vertex.max-parallelism")
        );
        assert_eq!(
            typo_of("vertex.min-paralelism", known),
            None,
            "three edits is too far"
        );
        // The lenient rule takes a look-alike Flink key for ours; the strict one does not.
        assert_eq!(
            closest("pipeline.max-parallelism", known),
            Some("vertex.max-parallelism")
        );
        assert_eq!(typo_of("pipeline.max-parallelism", known), None);
    }
}
