//! "Did you mean": the closest known name to a misspelt one.

/// The candidate closest to `name` by edit distance (case-insensitive), if it is close enough
/// to be a plausible typo.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&name, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
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
}
