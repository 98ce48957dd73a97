//! Connecting to the server: cleartext HTTP/2 or TLS, decided once from the global flags.

use std::path::Path;
use std::time::Duration;

use oanquan_proto::v1::account_service_client::AccountServiceClient;
use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_proto::v1::rules_service_client::RulesServiceClient;
use oanquan_proto::v1::{ListMovesRequest, ListMovesResponse};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::error::{CliError, code, error_chain};
use crate::files::{CA_MAX_BYTES, read_regular};
use crate::tokens::normalize_server;

/// The service clients over one HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Clients {
    pub games: GameServiceClient<Channel>,
    pub rules: RulesServiceClient<Channel>,
    pub accounts: AccountServiceClient<Channel>,
}

/// How long one unary request may take before the client calls the server unavailable. Streams
/// are not bounded by this (they live as long as the game), only by the HTTP/2 keepalive below.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// TCP connect, then (with TLS) the handshake: each bounded, so that a server that accepts and
/// then says nothing cannot keep the client waiting.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server and how to talk to it, built once from `--server` and `--ca-cert` so that every
/// connection (the first, and each reconnect of `play` and `watch`) uses the same settings.
#[derive(Debug, Clone)]
pub struct Server {
    /// `--server` in its one canonical spelling ([`normalize_server`], with the scheme it
    /// connects with): the token file's key and the name in messages.
    pub name: String,
    endpoint: Endpoint,
    tls: bool,
}

/// The scheme `--server` was given with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
    /// `host:port`: cleartext, or TLS with `--ca-cert`.
    Bare,
}

/// Splits `--server` into its scheme and the `host:port` after it.
fn split_scheme(server: &str) -> Result<(Scheme, &str), CliError> {
    let Some((scheme, rest)) = server.split_once("://") else {
        return Ok((Scheme::Bare, server));
    };
    if scheme.eq_ignore_ascii_case("http") {
        Ok((Scheme::Http, rest))
    } else if scheme.eq_ignore_ascii_case("https") {
        Ok((Scheme::Https, rest))
    } else {
        Err(CliError::new(
            code::USAGE,
            format!("--server `{server}`: use http://HOST:PORT, https://HOST:PORT or HOST:PORT"),
        ))
    }
}

impl Server {
    /// Checks the flags and, with TLS, reads the CA certificate.
    ///
    /// # Errors
    ///
    /// [`code::USAGE`]: an address that is not one, `--ca-cert` with an `http://` address, or a
    /// CA file that cannot be read or holds no valid PEM certificate.
    pub fn new(server: &str, ca_cert: Option<&Path>) -> Result<Self, CliError> {
        let given = server.trim();
        let (scheme, host_port) = split_scheme(given)?;
        let host_port = host_port.trim_end_matches('/');
        let tls = match (scheme, ca_cert) {
            (Scheme::Http, Some(ca)) => {
                return Err(CliError::new(
                    code::USAGE,
                    format!(
                        "--ca-cert {} is for TLS, but --server `{given}` asks for cleartext: \
                         use https://{host_port}, or drop --ca-cert (OANQUAN_CA_CERT)",
                        ca.display()
                    ),
                ));
            }
            (Scheme::Https, _) | (Scheme::Bare, Some(_)) => true,
            (Scheme::Http | Scheme::Bare, None) => false,
        };
        let uri = format!("{}://{host_port}", if tls { "https" } else { "http" });
        let name = normalize_server(&uri);
        let mut endpoint = Endpoint::from_shared(uri).map_err(|e| {
            CliError::new(
                code::USAGE,
                format!("--server `{given}` is not a valid address: {e}"),
            )
        })?;
        // The URI takes any digits as a port; a connection would then fail as if the server
        // were down.
        let written_port = endpoint
            .uri()
            .authority()
            .and_then(|authority| authority.as_str().rsplit_once(':'))
            .map(|(_, port)| port)
            .filter(|port| !port.contains(']'));
        if let Some(port) = written_port
            && !(port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok_and(|port| port > 0))
        {
            let port = if port.is_empty() {
                "the port is missing after `:`".to_owned()
            } else {
                format!(
                    "port {} is not one from 1 to 65535",
                    crate::shown::printable(port)
                )
            };
            return Err(CliError::new(
                code::USAGE,
                format!("--server `{given}` is not a valid address: {port}"),
            ));
        }
        // A path would be dropped without a word: the API lives at the server's root.
        if let Some(path) = endpoint.uri().path_and_query()
            && !matches!(path.as_str(), "" | "/")
        {
            return Err(CliError::new(
                code::USAGE,
                format!(
                    "--server `{given}` is not a valid address: give the server's root, without \
                     a path ({})",
                    crate::shown::printable(path.as_str())
                ),
            ));
        }
        if tls {
            // Mozilla's roots for servers with a public certificate, plus --ca-cert for a
            // self-signed one or a private CA.
            let mut config = ClientTlsConfig::new()
                .with_webpki_roots()
                .timeout(TLS_HANDSHAKE_TIMEOUT);
            if let Some(path) = ca_cert {
                config = config.ca_certificate(read_ca_cert(path)?);
            }
            endpoint = endpoint.tls_config(config).map_err(|e| {
                CliError::new(
                    code::USAGE,
                    format!("--server `{name}`: cannot set up TLS: {}", error_chain(&e)),
                )
            })?;
        }
        let endpoint = endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            // A half-open connection (a cable pulled, a proxy gone) would otherwise leave a watch
            // waiting forever; pings notice it within about 20 seconds.
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        Ok(Self {
            name,
            endpoint,
            tls,
        })
    }

    /// A failed connection, with what to do about it where the error says.
    fn connect_error(&self, err: &tonic::transport::Error) -> CliError {
        let detail = error_chain(err);
        let hint = connect_hint(self.tls, &detail).map_or(String::new(), |h| format!(" ({h})"));
        CliError::unavailable(&self.name, format!("{detail}{hint}"))
    }
}

/// Reads a PEM CA certificate for `--ca-cert`; a file without one is refused here rather than
/// left to fail every handshake later with "unknown issuer".
fn read_ca_cert(path: &Path) -> Result<Certificate, CliError> {
    let usage =
        |what: String| CliError::new(code::USAGE, format!("--ca-cert {}: {what}", path.display()));
    let pem = match read_regular(path, CA_MAX_BYTES) {
        Ok(Some((pem, _))) => pem,
        Ok(None) => return Err(usage("cannot read it: no such file".into())),
        Err(e) => return Err(usage(format!("cannot read it: {e}"))),
    };
    let text = String::from_utf8_lossy(&pem);
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(usage(
            "no PEM certificate in it (a block starting -----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    let certificate = Certificate::from_pem(pem);
    // tonic parses the PEM only when a TLS configuration is built: build a throwaway one, so
    // that a damaged file is reported as such.
    Endpoint::from_static("https://localhost")
        .tls_config(ClientTlsConfig::new().ca_certificate(certificate.clone()))
        .map_err(|e| usage(format!("not a valid PEM certificate: {}", error_chain(&e))))?;
    Ok(certificate)
}

/// What a person can do about a failed connection, recognised from rustls's error text (tonic
/// does not expose the TLS error types).
fn connect_hint(tls: bool, detail: &str) -> Option<&'static str> {
    if !tls {
        return None;
    }
    if detail.contains("certificate not valid for name") || detail.contains("NotValidForName") {
        Some(
            "the server's certificate is for another name: connect by a name it lists, \
             https://NAME:PORT",
        )
    } else if detail.contains("CaUsedAsEndEntity") {
        // What `openssl req -x509` makes by default (basicConstraints CA:TRUE); rustls, unlike
        // some other clients, refuses it as a server's own certificate, trusted or not.
        Some(
            "the server presents a CA certificate (CA:TRUE) as its own, which this client \
             refuses: give the server a certificate without CA:TRUE, e.g. one issued by that CA",
        )
    } else if detail.contains("invalid peer certificate") {
        Some(
            "the server's TLS certificate is not trusted; if it is self-signed or from a \
             private CA, pass that CA certificate with --ca-cert FILE",
        )
    } else if detail.contains("received corrupt message") || detail.contains("InvalidContentType") {
        Some("the server does not seem to speak TLS; try http://HOST:PORT")
    } else {
        None
    }
}

/// Opens a connection. Failing to connect is exit code 69.
pub async fn connect(server: &Server) -> Result<Clients, CliError> {
    let channel = server
        .endpoint
        .connect()
        .await
        .map_err(|e| server.connect_error(&e))?;
    Ok(Clients {
        games: GameServiceClient::new(channel.clone()),
        rules: RulesServiceClient::new(channel.clone()),
        accounts: AccountServiceClient::new(channel),
    })
}

/// A unary request with the client's timeout.
/// Every move of game `game_id`: `ListMoves` asked again from the last move received while
/// the server says there are more (a long game's moves may not fit in one response).
pub async fn all_moves(
    games: &GameServiceClient<Channel>,
    game_id: &str,
) -> Result<ListMovesResponse, tonic::Status> {
    pages_joined(async |after_move| {
        games
            .clone()
            .list_moves(request(ListMovesRequest {
                game_id: game_id.to_owned(),
                after_move,
                max_moves: 0,
            }))
            .await
            .map(tonic::Response::into_inner)
    })
    .await
}

/// The pages `page(after_move)` gives, from 0, joined into one answer.
async fn pages_joined<E>(
    mut page: impl AsyncFnMut(u32) -> Result<ListMovesResponse, E>,
) -> Result<ListMovesResponse, E> {
    let mut all = page(0).await?;
    while all.more {
        let after = all.moves.last().map_or(0, |last| last.number);
        let next = page(after).await?;
        // A page that does not move on would be asked for again for ever.
        if next.moves.last().is_none_or(|last| last.number <= after) {
            break;
        }
        all.more = next.more;
        all.moves.extend(next.moves);
    }
    all.more = false;
    Ok(all)
}

pub fn request<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(REQUEST_TIMEOUT);
    request
}

/// A unary request carrying a seat's bearer token.
pub fn authed<T>(message: T, token: &str) -> Result<tonic::Request<T>, CliError> {
    bearer(request(message), token)
}

/// `request` with a seat's bearer token added (streams take it too, with no deadline).
pub fn bearer<T>(
    mut request: tonic::Request<T>,
    token: &str,
) -> Result<tonic::Request<T>, CliError> {
    let value = format!("Bearer {token}").parse().map_err(|_| {
        CliError::new(
            code::AUTH,
            "the seat's token is not a valid header value (a damaged token file, or a bad \
             --token): use the token the server gave, or join the game again",
        )
    })?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

/// `request` sent as an account: its API key as the bearer token, if there is one (`None`
/// plays anonymously).
pub fn as_account<T>(
    mut request: tonic::Request<T>,
    api_key: Option<&str>,
) -> Result<tonic::Request<T>, CliError> {
    let Some(key) = api_key else {
        return Ok(request);
    };
    // The error names the file, never the key.
    let value = format!("Bearer {key}").parse().map_err(|_| {
        CliError::new(
            code::AUTH,
            "the API key in the account file is not a valid header value: check the file, or \
             store a working key with `oanquan login --force`",
        )
    })?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pages_of_moves_are_joined_until_no_more_follow() {
        let record = |number| oanquan_proto::v1::MoveRecord {
            number,
            ..Default::default()
        };
        let answer = |numbers: std::ops::RangeInclusive<u32>, more| ListMovesResponse {
            moves: numbers.map(record).collect(),
            more,
            ..Default::default()
        };
        let mut asked = Vec::new();
        let joined = pages_joined(async |after| {
            asked.push(after);
            Ok::<_, ()>(match after {
                0 => answer(1..=3, true),
                3 => answer(4..=5, true),
                _ => answer(6..=6, false),
            })
        })
        .await
        .unwrap();
        assert_eq!(asked, [0, 3, 5]);
        let numbers: Vec<u32> = joined.moves.iter().map(|m| m.number).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5, 6]);
        assert!(!joined.more);

        // A server that says "more" and sends nothing new is not asked again.
        let nothing = ListMovesResponse {
            more: true,
            ..Default::default()
        };
        for stuck in [nothing, answer(2..=3, true)] {
            let mut calls = 0;
            let joined = pages_joined(async |after| {
                calls += 1;
                Ok::<_, ()>(if after == 0 {
                    answer(1..=3, true)
                } else {
                    stuck.clone()
                })
            })
            .await
            .unwrap();
            assert_eq!((calls, joined.moves.len()), (2, 3));
        }
        // An error on any page is the answer.
        let failed = pages_joined(async |after| {
            if after == 0 {
                Ok(answer(1..=3, true))
            } else {
                Err("gone")
            }
        })
        .await;
        assert_eq!(failed.unwrap_err(), "gone");
    }

    /// `(tls, name)` of a `Server`, or the exit code and message of its error.
    fn server(address: &str, ca: Option<&Path>) -> Result<(bool, String), (u8, String)> {
        Server::new(address, ca)
            .map(|s| (s.tls, s.name))
            .map_err(|e| (e.code, e.message))
    }

    fn usage_error(address: &str, ca: Option<&Path>) -> String {
        match server(address, ca) {
            Err((code::USAGE, message)) => message,
            other => panic!("{address} {ca:?}: {other:?}"),
        }
    }

    fn ca_file(dir: &Path, name: &str, contents: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, contents).expect("write");
        path
    }

    #[test]
    fn scheme_decides_tls() {
        for (address, tls, name) in [
            ("127.0.0.1:50051", false, "http://127.0.0.1:50051"),
            ("http://[::1]:1", false, "http://[::1]:1"),
            (" http://Host:1/ ", false, "http://host:1"),
            ("HTTP://host:1", false, "http://host:1"),
            ("https://localhost", true, "https://localhost:443"),
            ("https://127.0.0.1:1/", true, "https://127.0.0.1:1"),
        ] {
            assert_eq!(
                server(address, None),
                Ok((tls, name.to_owned())),
                "{address}"
            );
        }
        assert!(usage_error("http://exa mple", None).contains("not a valid address"));
        assert!(usage_error("ftp://host:1", None).contains("https://HOST:PORT"));
        for address in [
            "http://127.0.0.1:99999",
            "127.0.0.1:122737",
            "localhost:0",
            "https://[::1]:65536",
            "127.0.0.1:+50051",
        ] {
            let message = usage_error(address, None);
            assert!(message.contains("from 1 to 65535"), "{address}: {message}");
        }
        assert!(usage_error("127.0.0.1:", None).contains("the port is missing"));
        for address in ["http://127.0.0.1:1/x", "127.0.0.1:1/api/", "http://h:1/?q"] {
            let message = usage_error(address, None);
            assert!(message.contains("without a path"), "{address}: {message}");
        }
        assert!(server("localhost:65535", None).is_ok());
    }

    #[test]
    fn ca_cert_implies_tls_and_contradicts_http() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        let ca = ca_file(dir.path(), "ca.pem", &key.cert.pem());
        // A bare host:port with a CA is TLS, and named (the token file's key) as such.
        assert_eq!(
            server("localhost:7", Some(&ca)),
            Ok((true, "https://localhost:7".to_owned()))
        );
        assert_eq!(
            server("https://localhost:7", Some(&ca)),
            Ok((true, "https://localhost:7".to_owned()))
        );
        let message = usage_error("http://localhost:7", Some(&ca));
        assert!(message.contains("https://localhost:7"), "{message}");
        assert!(message.contains("--ca-cert"), "{message}");
        // Checked before the file is read.
        let message = usage_error("http://localhost:7", Some(&dir.path().join("missing.pem")));
        assert!(message.contains("cleartext"), "{message}");
    }

    #[test]
    fn unusable_ca_files_are_usage_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.pem");
        let message = usage_error("https://localhost:7", Some(&missing));
        assert!(message.contains("missing.pem: cannot read it"), "{message}");

        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        let key_only = ca_file(dir.path(), "key.pem", &key.signing_key.serialize_pem());
        let message = usage_error("localhost:7", Some(&key_only));
        assert!(message.contains("no PEM certificate"), "{message}");

        let damaged = ca_file(
            dir.path(),
            "damaged.pem",
            "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
        );
        let message = usage_error("localhost:7", Some(&damaged));
        assert!(message.contains("not a valid PEM certificate"), "{message}");
    }

    #[test]
    fn handshake_failures_name_the_fix() {
        let unknown = "transport error: invalid peer certificate: UnknownIssuer";
        assert!(connect_hint(true, unknown).is_some_and(|h| h.contains("--ca-cert FILE")));
        let name = "transport error: invalid peer certificate: certificate not valid for name \
                    \"127.0.0.1\"; certificate is only valid for DnsName(\"localhost\")";
        assert!(connect_hint(true, name).is_some_and(|h| h.contains("another name")));
        let ca = "transport error: invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))";
        assert!(connect_hint(true, ca).is_some_and(|h| h.contains("CA:TRUE")));
        let cleartext = "transport error: received corrupt message of type InvalidContentType";
        assert!(connect_hint(true, cleartext).is_some_and(|h| h.contains("http://")));
        assert_eq!(
            connect_hint(true, "Connection refused (os error 111)"),
            None
        );
        assert_eq!(connect_hint(false, unknown), None);
    }

    #[test]
    fn api_keys_go_in_the_authorization_header() {
        let anonymous = as_account(request(()), None).expect("no key");
        assert!(anonymous.metadata().get("authorization").is_none());
        let signed = as_account(request(()), Some("oqk_a.b")).expect("a key");
        assert_eq!(
            signed
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer oqk_a.b")
        );
        let err = as_account(request(()), Some("oqk_\nsecret")).expect_err("invalid");
        assert_eq!(err.code, code::AUTH);
        assert!(!err.message.contains("secret"), "{}", err.message);
    }

    #[test]
    fn bad_tokens_are_an_auth_error() {
        let err = authed((), "line\nbreak").expect_err("invalid header");
        assert_eq!(err.code, code::AUTH);
        let ok = authed((), "abc").expect("valid");
        assert_eq!(
            ok.metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer abc")
        );
    }
}
