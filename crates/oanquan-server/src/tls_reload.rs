//! Reloading the TLS certificate without a restart: on SIGHUP, and when the files' contents
//! change (read every `poll_interval`, for certificate managers that only rewrite files).
//!
//! Only new connections see the new certificate; established ones keep the session they
//! negotiated, so open streams go on. A pair that cannot be used (unreadable, not PEM, a key
//! that is not the certificate's, or caught half-written) is refused with a warning and the
//! certificate in use is kept; the next change or SIGHUP tries again. [`TlsIdentity`] is the
//! pair itself, checked when it is read.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tracing::{info, warn};

/// Why a certificate and key cannot be served, naming the file or the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

/// A TLS certificate chain and private key, PEM-encoded. `Debug` does not show the key.
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate chain, leaf first.
    pub cert_pem: Vec<u8>,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .finish_non_exhaustive()
    }
}

/// The most a certificate chain or key file may hold: real ones are a few kilobytes, and each
/// reload keeps what it read (an outside probe's 50 MB file took 100 MB of memory for good).
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// A regular file's bytes, at most [`MAX_PEM_FILE`]. Anything else is refused before it is
/// opened: reading a FIFO would wait for a writer, at start or in the reload loop, for ever.
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_PEM_FILE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} KiB, which no certificate chain or key needs",
                MAX_PEM_FILE / 1024
            ),
        ));
    }
    Ok(bytes)
}

/// Whether a DER certificate holds the `basicConstraints` extension (OID 2.5.29.19) with `cA`
/// TRUE: the extension's value is an OCTET STRING around a SEQUENCE whose first element, when
/// present and TRUE, is `cA` (DER writes a default FALSE not at all).
fn says_ca(der: &[u8]) -> bool {
    const OID: [u8; 5] = [0x06, 0x03, 0x55, 0x1d, 0x13];
    let Some(at) = der.windows(OID.len()).position(|w| w == OID) else {
        return false;
    };
    let mut rest = &der[at + OID.len()..];
    // `critical`, when present.
    if let [0x01, 0x01, _, tail @ ..] = rest {
        rest = tail;
    }
    // The OCTET STRING's and the SEQUENCE's headers (short lengths: the extension is tiny).
    match rest {
        [0x04, _, 0x30, _, 0x01, 0x01, flag, ..] => *flag != 0,
        _ => false,
    }
}

/// A PEM problem in words: the library's own names the missing end line by its bytes
/// (`[67, 69, 82, …]`).
fn pem_problem(error: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { end_marker } => format!(
            "a section has no end line (-----END {}-----): the file is cut short",
            String::from_utf8_lossy(end_marker).trim()
        ),
        Error::IllegalSectionStart { line } => format!(
            "a section's first line is malformed (\"{}\")",
            String::from_utf8_lossy(line)
                .chars()
                .take(80)
                .collect::<String>()
        ),
        Error::Base64Decode(why) => {
            format!("the text between the BEGIN and END lines is not valid base64 ({why})")
        }
        other => other.to_string(),
    }
}

/// A refusal of the pair by rustls in words: its own speak of the "peer", which is us here.
fn pair_problem(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InvalidCertificate(why) => {
            format!("the certificate does not decode as an X.509 certificate ({why:?})")
        }
        other => other.to_string(),
    }
}

impl TlsIdentity {
    /// Reads both files and checks that they make a usable TLS configuration.
    ///
    /// # Errors
    ///
    /// [`TlsError`] naming the file or the problem.
    pub fn read(cert: &Path, key: &Path) -> Result<TlsIdentity, TlsError> {
        let read = |path: &Path, what: &str| {
            read_file(path).map_err(|e| {
                TlsError(format!(
                    "cannot read the TLS {what} {}: {e}",
                    path.display()
                ))
            })
        };
        let identity = TlsIdentity {
            cert_pem: read(cert, "certificate")?,
            key_pem: read(key, "private key")?,
        };
        identity.acceptor()?;
        if identity.is_ca() {
            // Served all the same (a client that skips verification still connects), but every
            // verifying client refuses it, and only with its own words.
            tracing::warn!(
                file = %cert.display(),
                "the TLS certificate is a CA certificate (basicConstraints CA:TRUE, what \
                 `openssl req -x509` makes by default): clients that verify it refuse it as a \
                 server's own (CaUsedAsEndEntity); give the server a leaf certificate (README, \
                 \"Connecting with TLS\")"
            );
        }
        Ok(identity)
    }

    /// Whether the first certificate of the chain says `basicConstraints` `cA` TRUE.
    fn is_ca(&self) -> bool {
        CertificateDer::pem_slice_iter(&self.cert_pem)
            .next()
            .and_then(Result::ok)
            .is_some_and(|der| says_ca(&der))
    }

    /// The TLS side of the server: rustls with the ring provider, TLS 1.2 and 1.3, ALPN `h2`.
    pub(crate) fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let unusable =
            |what: &str, e: &dyn fmt::Display| TlsError(format!("unusable TLS {what}: {e}"));
        let chain = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                unusable(
                    "certificate (not a PEM certificate chain)",
                    &pem_problem(&e),
                )
            })?;
        if chain.is_empty() {
            return Err(TlsError(
                "unusable TLS certificate: no PEM certificate in the file".to_owned(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| {
            unusable(
                "private key (not a PEM PKCS#8, PKCS#1 or SEC1 key)",
                &pem_problem(&e),
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| unusable("configuration", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| unusable("certificate or key", &pair_problem(&e)))?;
        // HTTP/1.1 too: browsers may speak gRPC-Web and fetch the page over it.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Where the certificate in use came from, to read it again.
#[derive(Debug, Clone)]
pub struct TlsReload {
    /// The PEM certificate chain (`--tls-cert`).
    pub cert: PathBuf,
    /// Its private key (`--tls-key`).
    pub key: PathBuf,
    /// How often to look for new contents; zero reloads on SIGHUP only.
    pub poll_interval: Duration,
}

/// Reloads into `acceptor` per `files` until `stop` turns `true`; `loaded` is the identity in
/// use, so that unchanged files are not read again.
pub(crate) async fn run(
    files: TlsReload,
    mut tried: TlsIdentity,
    acceptor: watch::Sender<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let mut hangup = hangup();
    // A zero period would spin; polling is then off and only SIGHUP reloads.
    let mut poll = (!files.poll_interval.is_zero()).then(|| {
        let mut poll = tokio::time::interval(files.poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        poll
    });
    let mut unreadable_warned = false;
    loop {
        let asked = tokio::select! {
            _ = stop.wait_for(|stopping| *stopping) => return,
            () = next_hangup(&mut hangup) => true,
            () = next_tick(&mut poll) => false,
        };
        // Files in the middle of being replaced read as a pair that does not match: refused
        // below and read again at the next tick, not mistaken for the final pair.
        let read = |path: &PathBuf| read_file(path).ok();
        // A file gone (deleted, or unreadable) keeps the pair in use, as a bad file does, and
        // says so once rather than at every tick.
        let unreadable: Vec<String> = [&files.cert, &files.key]
            .into_iter()
            .filter_map(|path| {
                read_file(path)
                    .err()
                    .map(|error| format!("{}: {error}", path.display()))
            })
            .collect();
        if unreadable.is_empty() {
            unreadable_warned = false;
        } else if !unreadable_warned {
            unreadable_warned = true;
            warn!(
                files = %unreadable.join("; "),
                "TLS certificate or key file cannot be read; the pair in use is kept until it can"
            );
        }
        if !asked {
            let unchanged = read(&files.cert).is_none_or(|cert| cert == tried.cert_pem)
                && read(&files.key).is_none_or(|key| key == tried.key_pem);
            if unchanged {
                continue;
            }
        }
        let trigger = if asked { "SIGHUP" } else { "the files changed" };
        let reloaded = TlsIdentity::read(&files.cert, &files.key)
            .and_then(|identity| identity.acceptor().map(|new| (identity, new)));
        match reloaded {
            Ok((identity, new)) => {
                acceptor.send_replace(new);
                tried = identity;
                info!(
                    trigger,
                    "TLS certificate reloaded: new connections use the new one"
                );
            }
            Err(error) => {
                // Remembered as tried, so that polling does not warn about it every tick.
                if let (Some(cert), Some(key)) = (read(&files.cert), read(&files.key)) {
                    tried = TlsIdentity {
                        cert_pem: cert,
                        key_pem: key,
                    };
                }
                warn!(
                    trigger,
                    %error,
                    "TLS certificate not reloaded; the one in use is kept"
                );
            }
        }
    }
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

fn hangup() -> Hangup {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::hangup()) {
            Ok(signal) => Some(signal),
            Err(error) => {
                warn!(%error, "cannot listen for SIGHUP; the TLS certificate reloads only when its files change");
                None
            }
        }
    }
    #[cfg(not(unix))]
    None
}

async fn next_hangup(hangup: &mut Hangup) {
    #[cfg(unix)]
    if let Some(signal) = hangup {
        if signal.recv().await.is_some() {
            return;
        }
    }
    let _ = hangup;
    std::future::pending().await
}

async fn next_tick(poll: &mut Option<tokio::time::Interval>) {
    match poll {
        Some(poll) => {
            poll.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate() -> rcgen::CertifiedKey<rcgen::KeyPair> {
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap()
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let (a, b) = (certificate(), certificate());
        let mismatched = TlsIdentity {
            cert_pem: a.cert.pem().into_bytes(),
            key_pem: b.signing_key.serialize_pem().into_bytes(),
        };
        assert!(mismatched.acceptor().is_err());
        let matched = TlsIdentity {
            cert_pem: a.cert.pem().into_bytes(),
            key_pem: a.signing_key.serialize_pem().into_bytes(),
        };
        assert!(matched.acceptor().is_ok());
    }

    /// A FIFO (or a folder) where a certificate should be is refused at once, not read.
    #[test]
    fn a_fifo_in_place_of_a_certificate_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("cert.pem");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let error = TlsIdentity::read(&fifo, &fifo).unwrap_err();
        assert!(error.0.contains("not a regular file"), "{}", error.0);
        let error = TlsIdentity::read(dir.path(), dir.path()).unwrap_err();
        assert!(error.0.contains("not a regular file"), "{}", error.0);
    }
    /// An outside probe's damaged files were refused in the library's words: the missing end
    /// line as its bytes (`[67, 69, 82, …]`) and the server's own certificate as the "peer's".
    #[test]
    fn damaged_pem_files_are_refused_in_words() {
        let pair = certificate();
        let cert = pair.cert.pem();
        let key = pair.signing_key.serialize_pem().into_bytes();
        let refused = |cert_pem: Vec<u8>| {
            TlsIdentity {
                cert_pem,
                key_pem: key.clone(),
            }
            .acceptor()
            .err()
            .expect("refused")
            .0
        };
        let cut = refused(cert.as_bytes()[..cert.len() / 2].to_vec());
        assert!(
            cut.contains("cut short")
                && cut.contains("-----END CERTIFICATE-----")
                && !cut.contains('['),
            "{cut}"
        );
        // One character of the base64 changed: still base64, no longer a certificate.
        let mut flipped = cert.clone().into_bytes();
        let at = flipped.len() / 2;
        flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
        let flipped = refused(flipped);
        assert!(!flipped.contains("peer"), "{flipped}");
    }

    /// Each reload keeps what it read: a huge file is refused, not held.
    #[test]
    fn a_certificate_file_past_a_mebibyte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("cert.pem");
        std::fs::write(&huge, vec![b'x'; 2 * 1024 * 1024]).unwrap();
        let error = TlsIdentity::read(&huge, &huge).unwrap_err();
        assert!(error.0.contains("larger than 1024 KiB"), "{}", error.0);
    }

    /// rcgen makes leaves by default; a CA is what `openssl req -x509` makes by default.
    #[test]
    fn a_ca_certificate_is_told_from_a_leaf() {
        let leaf = certificate();
        assert!(!says_ca(leaf.cert.der()));
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        assert!(says_ca(ca.der()));
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.is_ca = rcgen::IsCa::ExplicitNoCa;
        let explicit_leaf = params.self_signed(&key).unwrap();
        assert!(!says_ca(explicit_leaf.der()));
    }
}
