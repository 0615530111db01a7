//! libpq's password file (`PGPASSFILE`, else `~/.pgpass`): the password of a connection whose
//! URL has none and without `PGPASSWORD`, read exactly as libpq reads it, so that one file serves
//! `psql` and flowscale alike.
//!
//! Each line is `hostname:port:database:username:password`; the first line whose four first
//! fields match the connection gives the password. A field that is exactly `*` matches
//! anything; `\:` and `\\` stand for a literal `:` and `\`; lines starting with `#` are comments.
//! A file that group or others may read is ignored with a warning, as libpq does, and so is a
//! file that is not a regular file.

use std::path::{Path, PathBuf};

use crate::credentials::{self, Secret};

/// What a connection is looked up by: the fields libpq compares, as it compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The host name or address (`localhost` for the default Unix socket directory).
    pub(super) host: String,
    /// The port, as text (`5432` when the URL names none).
    pub(super) port: String,
    /// The database (the user's name when the URL names none).
    pub(super) database: String,
    /// The role.
    pub(super) user: String,
}

/// The password of the first line of `text` that matches `target`.
pub(super) fn lookup(text: &str, target: &Target) -> Option<String> {
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        let wanted = [
            target.host.as_str(),
            &target.port,
            &target.database,
            &target.user,
        ];
        let matched = wanted.iter().all(|want| match field_matches(rest, want) {
            Some(after) => {
                rest = after;
                true
            }
            None => false,
        });
        if matched {
            return Some(unescape(rest));
        }
    }
    None
}

/// Whether the field at the start of `line` matches `want`; the text after the field's `:`.
/// As libpq compares: a field of exactly `*` matches anything; otherwise the field, with `\x`
/// standing for `x`, must equal `want` (an unescaped `:` ends the field only where `want` ends).
fn field_matches<'a>(line: &'a str, want: &str) -> Option<&'a str> {
    if let Some(after) = line.strip_prefix("*:") {
        return Some(after);
    }
    let mut chars = line.char_indices();
    let mut want = want.chars().peekable();
    while let Some((i, c)) = chars.next() {
        let c = match c {
            ':' if want.peek().is_none() => return Some(&line[i + 1..]),
            '\\' => match chars.next() {
                Some((_, escaped)) => escaped,
                None => return None,
            },
            c => c,
        };
        if want.next() != Some(c) {
            return None;
        }
    }
    // A line with fewer than five fields matches nothing.
    None
}

/// The password field, up to its first unescaped `:`, with `\x` standing for `x`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ':' => break,
            '\\' => out.push(chars.next().unwrap_or('\\')),
            c => out.push(c),
        }
    }
    out
}

/// Where the password file is: `PGPASSFILE`, else `.pgpass` in the home directory.
pub(super) fn location(pgpassfile: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    pgpassfile
        .map(Path::to_path_buf)
        .or_else(|| home.map(|home| home.join(".pgpass")))
}

/// What reading the password file came to.
#[derive(Debug)]
pub(super) enum PassFile {
    /// There is no such file: no password from it, and nothing to say (libpq says nothing).
    Missing,
    /// The file cannot be used: why, for a warning (never its contents).
    Ignored(String),
    /// The file's contents.
    Read(Secret),
}

/// Reads the password file at `path`, refusing one that group or others may read (libpq
/// ignores such a file with a warning, and so does this).
pub(super) fn read(path: &Path) -> PassFile {
    match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return PassFile::Missing,
        Err(err) => {
            return PassFile::Ignored(format!(
                "password file {} cannot be read: {err}",
                path.display()
            ));
        }
        Ok(meta) if !meta.is_file() => {
            return PassFile::Ignored(format!(
                "password file {} is not a plain file",
                path.display()
            ));
        }
        Ok(_) => {}
    }
    match credentials::read_secret(path) {
        Ok(text) => PassFile::Read(text),
        Err(err) => PassFile::Ignored(format!("password file ignored: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str, port: &str, database: &str, user: &str) -> Target {
        Target {
            host: host.to_string(),
            port: port.to_string(),
            database: database.to_string(),
            user: user.to_string(),
        }
    }

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let text = "# a comment\n\
                    db.example:5432:flowscale:other:not-this-one\n\
                    db.example:5432:flowscale:flowscale:first\n\
                    db.example:5432:flowscale:flowscale:second\n";
        let t = target("db.example", "5432", "flowscale", "flowscale");
        assert_eq!(lookup(text, &t).as_deref(), Some("first"));
        // Every field counts: another port, database or host matches no line.
        for other in [
            target("db.example", "5433", "flowscale", "flowscale"),
            target("db.example", "5432", "flowscal", "flowscale"),
            target("db.example2", "5432", "flowscale", "flowscale"),
            target("db", "5432", "flowscale", "flowscale"),
        ] {
            assert_eq!(lookup(text, &other), None, "{other:?}");
        }
    }

    #[test]
    fn a_star_field_matches_anything_but_only_as_the_whole_field() {
        let text = "*:*:*:flowscale:any-host\n";
        assert_eq!(
            lookup(text, &target("10.0.0.1", "6543", "x", "flowscale")).as_deref(),
            Some("any-host")
        );
        assert_eq!(lookup(text, &target("h", "1", "x", "other")), None);
        // `db*` is the literal text `db*`, not a prefix pattern.
        let text = "db*:5432:*:*:literal\n";
        assert_eq!(lookup(text, &target("db1", "5432", "x", "u")), None);
        assert_eq!(
            lookup(text, &target("db*", "5432", "x", "u")).as_deref(),
            Some("literal")
        );
    }

    #[test]
    fn escaped_colons_and_backslashes_are_part_of_a_field_and_of_the_password() {
        // libpq compares an unescaped colon with the target's too, where the target goes on.
        let text = "fe80::2:5432:*:*:unescaped\n";
        assert_eq!(
            lookup(text, &target("fe80::2", "5432", "d", "u")).as_deref(),
            Some("unescaped")
        );
        let text = "::1\\:x:5432:*:*:no\n\
                    fe80\\:\\:1:5432:d\\\\b:*:pa\\:ss\\\\word:with:colons\n";
        let t = target("fe80::1", "5432", "d\\b", "u");
        assert_eq!(
            lookup(text, &t).as_deref(),
            // The password ends at its first unescaped colon.
            Some("pa:ss\\word")
        );
    }

    #[test]
    fn short_lines_and_empty_lines_match_nothing() {
        let text = "\n\nhost:5432:db:user\nhost:5432:db\n";
        assert_eq!(lookup(text, &target("host", "5432", "db", "user")), None);
        // A line with an empty password is a match with an empty password, as in libpq.
        let text = "host:5432:db:user:\r\n";
        assert_eq!(
            lookup(text, &target("host", "5432", "db", "user")).as_deref(),
            Some("")
        );
    }

    #[test]
    fn pgpassfile_wins_over_the_home_directory() {
        let home = Path::new("/home/u");
        assert_eq!(
            location(Some(Path::new("/etc/flowscale/pgpass")), Some(home)),
            Some(PathBuf::from("/etc/flowscale/pgpass"))
        );
        assert_eq!(
            location(None, Some(home)),
            Some(PathBuf::from("/home/u/.pgpass"))
        );
        assert_eq!(location(None, None), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_group_or_others_may_read_is_ignored_and_a_missing_one_is_no_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pgpass");
        assert!(matches!(read(&path), PassFile::Missing));
        std::fs::write(&path, "*:*:*:*:secret-password\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        match read(&path) {
            PassFile::Ignored(why) => {
                assert!(why.contains(&path.display().to_string()), "{why}");
                assert!(!why.contains("secret-password"), "{why}");
            }
            other => panic!("a readable file is used: {other:?}"),
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        match read(&path) {
            PassFile::Read(text) => assert_eq!(
                lookup(text.expose(), &target("h", "1", "d", "u")).as_deref(),
                Some("secret-password")
            ),
            other => panic!("a private file is read: {other:?}"),
        }
        assert!(matches!(read(dir.path()), PassFile::Ignored(_)));
    }
}
