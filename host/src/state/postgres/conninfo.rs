//! What `[host] state = "postgres://..."` says, read with libpq's meanings: the server, the
//! database and role, the TLS parameters `sslmode`, `sslrootcert`, `sslcert` and `sslkey`, and
//! where the password comes from (the URL, else `PGPASSWORD`, else the password file).
//!
//! The client's own URL parser knows only `disable`, `prefer` and `require` and refuses the other
//! parameters, so the TLS ones are taken out here and the rest is handed to it.

use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;
use postgres::config::{Host, SslMode as ClientSslMode};

use super::pgpass::{self, PassFile, Target};
use crate::credentials::Secret;

/// libpq's `sslmode`: how much of TLS the link insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP: anyone on the path reads and changes everything, the password included when
    /// the server asks for it in clear.
    Disable,
    /// TLS when the server offers it, plain otherwise (or when the handshake fails): protects
    /// against a passive eavesdropper only when the server has TLS on. libpq's default.
    Prefer,
    /// TLS or nothing, with the server's certificate unchecked: no eavesdropping, but whoever
    /// sits on the path can pose as the server. With a root certificate, as `verify-ca`.
    Require,
    /// TLS, and the server's certificate chains to the root certificate: only a holder of a
    /// certificate from that CA can pose as the server.
    VerifyCa,
    /// As `verify-ca`, and the certificate names the host of the URL: only that server.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "`sslmode={other}` is not one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }

    /// Whether the server's certificate must chain to a root certificate.
    pub(crate) fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// What the process environment adds to a URL, as libpq reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env {
    /// `PGPASSWORD`.
    pub(crate) pgpassword: Option<String>,
    /// `PGPASSFILE`.
    pub(crate) pgpassfile: Option<PathBuf>,
    /// `HOME`: where `.pgpass` and `.postgresql/` are.
    pub(crate) home: Option<PathBuf>,
}

impl Env {
    /// This process's environment.
    pub(crate) fn process() -> Env {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Env {
            pgpassword: var("PGPASSWORD").and_then(|v| v.into_string().ok()),
            pgpassfile: var("PGPASSFILE").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
        }
    }
}

/// The TLS files of a link: the root certificate(s) the server's certificate must chain to, and
/// the client certificate and key presented to a server that asks for one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// `sslrootcert`, or `~/.postgresql/root.crt` when it exists.
    pub(crate) root: Option<PathBuf>,
    /// `sslcert` and `sslkey` (or `~/.postgresql/postgresql.crt` and `.key` when they exist).
    pub(crate) client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// Every file, for change detection.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.root.iter().cloned().collect();
        if let Some((cert, key)) = &self.client {
            paths.extend([cert.clone(), key.clone()]);
        }
        paths
    }
}

/// A parsed `[host] state` URL.
#[derive(Debug)]
pub(crate) struct ConnInfo {
    /// The client's configuration: everything but the TLS parameters and the password.
    pub(crate) config: postgres::Config,
    /// The TLS the link insists on.
    pub(crate) mode: SslMode,
    /// The files TLS uses (none with `disable`).
    pub(crate) tls: TlsFiles,
    /// The server's address(es) as errors name them: `host:port`.
    pub(crate) server: String,
    /// The password written in the URL.
    url_password: Option<Secret>,
}

/// Why a `[host] state` URL cannot be used (never with the password in it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UrlError(String);

impl ConnInfo {
    /// Reads `url` with libpq's meanings; `env` gives the home directory of the default TLS
    /// files. Files named in the URL must exist (libpq would silently go without a missing
    /// client certificate); the default ones are used when they exist.
    pub(crate) fn parse(url: &str, env: &Env) -> Result<ConnInfo, UrlError> {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut mode = SslMode::Prefer;
        let (mut root, mut cert, mut key) = (None, None, None);
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = || {
                percent_decode_str(value)
                    .decode_utf8()
                    .map(|v| v.into_owned())
                    .map_err(|_| UrlError(format!("the value of `{name}` is not UTF-8")))
            };
            match name {
                "sslmode" => mode = SslMode::parse(&decoded()?).map_err(UrlError)?,
                "sslrootcert" => root = Some(PathBuf::from(decoded()?)),
                "sslcert" => cert = Some(PathBuf::from(decoded()?)),
                "sslkey" => key = Some(PathBuf::from(decoded()?)),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config: postgres::Config = rest
            .parse()
            .map_err(|e: postgres::Error| UrlError(e.to_string()))?;
        let url_password = config
            .get_password()
            .map(|p| {
                String::from_utf8(p.to_vec())
                    .map(Secret::new)
                    .map_err(|_| UrlError("the password is not UTF-8".to_string()))
            })
            .transpose()?;
        config.ssl_mode(match mode {
            SslMode::Disable => ClientSslMode::Disable,
            SslMode::Prefer => ClientSslMode::Prefer,
            // The stricter modes are TLS or nothing; the verifier tells them apart.
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ClientSslMode::Require,
        });
        let tls = if mode == SslMode::Disable {
            TlsFiles::default()
        } else {
            tls_files(mode, (root, cert, key), env.home.as_deref())?
        };
        let server = server(&config);
        Ok(ConnInfo {
            config,
            mode,
            tls,
            server,
            url_password,
        })
    }

    /// The password to log in with: the URL's, else `PGPASSWORD`, else the first matching line
    /// of the password file. A password file that cannot be used is said in the second value
    /// (a warning, as libpq gives), and gives no password.
    pub(crate) fn password(&self, env: &Env) -> (Option<Secret>, Option<String>) {
        if let Some(password) = &self.url_password {
            return (Some(Secret::new(password.expose().to_string())), None);
        }
        if let Some(password) = &env.pgpassword {
            return (Some(Secret::new(password.clone())), None);
        }
        let Some(path) = self.password_file(env) else {
            return (None, None);
        };
        match pgpass::read(&path) {
            PassFile::Missing => (None, None),
            PassFile::Ignored(why) => (None, Some(why)),
            PassFile::Read(text) => {
                let found = self
                    .targets()
                    .iter()
                    .find_map(|target| pgpass::lookup(text.expose(), target));
                (found.map(Secret::new), None)
            }
        }
    }

    /// Where the password file is looked for.
    pub(crate) fn password_file(&self, env: &Env) -> Option<PathBuf> {
        pgpass::location(env.pgpassfile.as_deref(), env.home.as_deref())
    }

    /// What the password file is searched by, one per host of the URL.
    fn targets(&self) -> Vec<Target> {
        let config = &self.config;
        let user = config.get_user().unwrap_or_default().to_string();
        let database = config.get_dbname().unwrap_or(&user).to_string();
        let hosts = config.get_hosts();
        let ports = config.get_ports();
        let port = |i: usize| {
            ports
                .get(i)
                .or(ports.first())
                .copied()
                .unwrap_or(DEFAULT_PORT)
        };
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| Target {
                host: match host {
                    Host::Tcp(name) => name.clone(),
                    // libpq looks a Unix socket connection up as `localhost`.
                    #[cfg(unix)]
                    Host::Unix(_) => "localhost".to_string(),
                },
                port: port(i).to_string(),
                database: database.clone(),
                user: user.clone(),
            })
            .collect()
    }
}

/// PostgreSQL's port.
const DEFAULT_PORT: u16 = 5432;

/// The files TLS uses in `mode`: those named in the URL, else libpq's defaults in
/// `~/.postgresql` when they exist. The verifying modes need a root certificate.
fn tls_files(
    mode: SslMode,
    (root, cert, key): (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>),
    home: Option<&Path>,
) -> Result<TlsFiles, UrlError> {
    let default = |name: &str| home.map(|h| h.join(".postgresql").join(name));
    let existing = |path: Option<PathBuf>| path.filter(|p| p.exists());
    let root = root.or_else(|| existing(default("root.crt")));
    if mode.verifies() && root.is_none() {
        return Err(UrlError(format!(
            "`sslmode={}` needs the root certificate of the server's CA: add `sslrootcert=/path/to/ca.pem` (or put it in ~/.postgresql/root.crt)",
            if mode == SslMode::VerifyCa {
                "verify-ca"
            } else {
                "verify-full"
            }
        )));
    }
    let client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (Some(cert), None) => match default("postgresql.key") {
            Some(key) => Some((cert, key)),
            None => return Err(UrlError("`sslcert` needs `sslkey`".to_string())),
        },
        (None, Some(_)) => return Err(UrlError("`sslkey` needs `sslcert`".to_string())),
        (None, None) => {
            existing(default("postgresql.crt")).zip(existing(default("postgresql.key")))
        }
    };
    Ok(TlsFiles { root, client })
}

/// The server's address(es), `host:port` joined with `, `, for error messages.
fn server(config: &postgres::Config) -> String {
    let ports = config.get_ports();
    config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports
                .get(i)
                .or(ports.first())
                .copied()
                .unwrap_or(DEFAULT_PORT);
            match host {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<ConnInfo, UrlError> {
        ConnInfo::parse(url, &Env::default())
    }

    #[test]
    fn each_sslmode_sets_the_clients_mode_and_the_strict_ones_need_a_root() {
        let cases = [
            ("disable", SslMode::Disable, ClientSslMode::Disable),
            ("prefer", SslMode::Prefer, ClientSslMode::Prefer),
            ("require", SslMode::Require, ClientSslMode::Require),
            ("verify-ca", SslMode::VerifyCa, ClientSslMode::Require),
            ("verify-full", SslMode::VerifyFull, ClientSslMode::Require),
        ];
        for (text, mode, client) in cases {
            let url = format!("postgres://u@db:5433/d?sslmode={text}&sslrootcert=/etc/ca.pem");
            let info = parse(&url).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(info.mode, mode, "{text}");
            assert_eq!(info.config.get_ssl_mode(), client, "{text}");
            let root = (mode != SslMode::Disable).then(|| PathBuf::from("/etc/ca.pem"));
            assert_eq!(info.tls.root, root, "{text}");
        }
        // libpq's default is `prefer`.
        assert_eq!(
            parse("postgres://u@db/d").expect("url").mode,
            SslMode::Prefer
        );
        for strict in ["verify-ca", "verify-full"] {
            let err = parse(&format!("postgres://u@db/d?sslmode={strict}")).expect_err(strict);
            assert!(err.to_string().contains("sslrootcert"), "{err}");
        }
        let err = parse("postgres://u@db/d?sslmode=verify").expect_err("unknown mode");
        assert!(err.to_string().contains("`sslmode=verify`"), "{err}");
    }

    #[test]
    fn tls_parameters_are_taken_out_and_the_others_reach_the_client() {
        let info = parse(
            "postgres://u@db.example:6432/flowscale?application_name=fs&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&sslcert=/c.pem&sslkey=/c.key&connect_timeout=7",
        )
        .expect("a URL the client alone would refuse");
        assert_eq!(info.config.get_application_name(), Some("fs"));
        assert_eq!(
            info.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(7))
        );
        assert_eq!(info.tls.root, Some(PathBuf::from("/etc/ca dir/ca.pem")));
        assert_eq!(
            info.tls.client,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/c.key")))
        );
        assert_eq!(info.server, "db.example:6432");
        assert_eq!(info.tls.paths().len(), 3);
        // Unknown parameters still reach the client, which refuses them.
        assert!(parse("postgres://u@db/d?nonsense=1").is_err());
        let err = parse("postgres://u@db/d?sslkey=/k").expect_err("a key alone");
        assert!(
            err.to_string().contains("`sslkey` needs `sslcert`"),
            "{err}"
        );
    }

    #[test]
    fn disable_uses_no_tls_file_and_servers_are_named_with_their_ports() {
        let info = parse("postgres://u@db/d?sslmode=disable&sslrootcert=/ca.pem").expect("url");
        assert_eq!(info.tls, TlsFiles::default());
        assert_eq!(info.server, "db:5432");
        let info = parse("postgresql://u@[::1]:7000,other/d").expect("url");
        // A host without a port has the default one (as in libpq).
        assert_eq!(info.server, "[::1]:7000, other:5432");
    }

    #[test]
    fn default_tls_files_in_the_home_directory_are_used_only_when_they_exist() {
        let home = tempfile::tempdir().expect("tempdir");
        let env = Env {
            home: Some(home.path().to_path_buf()),
            ..Env::default()
        };
        let url = "postgres://u@db/d?sslmode=require";
        let info = ConnInfo::parse(url, &env).expect("url");
        assert_eq!(info.tls, TlsFiles::default());
        let dir = home.path().join(".postgresql");
        std::fs::create_dir(&dir).expect("dir");
        for name in ["root.crt", "postgresql.crt", "postgresql.key"] {
            std::fs::write(dir.join(name), "x").expect("write");
        }
        let info = ConnInfo::parse(url, &env).expect("url");
        assert_eq!(info.tls.root, Some(dir.join("root.crt")));
        assert_eq!(
            info.tls.client,
            Some((dir.join("postgresql.crt"), dir.join("postgresql.key")))
        );
        let info = ConnInfo::parse("postgres://u@db/d?sslmode=verify-full", &env).expect("url");
        assert_eq!(info.tls.root, Some(dir.join("root.crt")));
    }

    #[test]
    fn the_password_comes_from_the_url_then_pgpassword_then_the_password_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "db:5432:d:u:from-file\n").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let mut env = Env {
            pgpassword: Some("from-env".to_string()),
            pgpassfile: Some(file.clone()),
            home: None,
        };
        let password = |url: &str, env: &Env| {
            let (password, warning) = parse(url).expect("url").password(env);
            assert_eq!(warning, None);
            password.map(|p| p.expose().to_string())
        };
        assert_eq!(
            password("postgres://u:from%3Aurl@db/d", &env).as_deref(),
            Some("from:url")
        );
        assert_eq!(
            password("postgres://u@db/d", &env).as_deref(),
            Some("from-env")
        );
        env.pgpassword = None;
        assert_eq!(
            password("postgres://u@db/d", &env).as_deref(),
            Some("from-file")
        );
        // The file is searched by the URL's host, port, database and role.
        assert_eq!(password("postgres://u@db:5433/d", &env), None);
        assert_eq!(password("postgres://v@db/d", &env), None);
        // Without a database, libpq's database is the role's name.
        std::fs::write(&file, "db:5432:u:u:db-is-user\n").expect("write");
        assert_eq!(
            password("postgres://u@db", &env).as_deref(),
            Some("db-is-user")
        );
        env.pgpassfile = Some(dir.path().join("missing"));
        assert_eq!(password("postgres://u@db/d", &env), None);
    }

    #[test]
    fn errors_never_show_the_password() {
        for url in [
            "postgres://u:hunter2-secret@db/d?sslmode=bogus",
            "postgres://u:hunter2-secret@db/d?sslmode=verify-full",
            "postgres://u:hunter2-secret@db/d?unknown=1",
            "postgres://u:hunter2-secret@db:notaport/d",
        ] {
            let err = parse(url).expect_err(url).to_string();
            assert!(!err.contains("hunter2"), "{url}: {err}");
        }
    }
}
