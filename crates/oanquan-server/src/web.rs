//! The browser side: the web page embedded in the binary, gRPC-Web beside gRPC on the same
//! port, and CORS for pages served elsewhere.
//!
//! Every gRPC and gRPC-Web call is a POST, so GET and HEAD are the page's: [`WebLayer`] answers
//! them (or 404s them under `--no-web`) before anything gRPC sees them. The bundle is built
//! from `web/` by Vite and committed in `web-dist/`, so building the server needs no Node.js.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::Either;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use include_dir::{Dir, include_dir};
use tonic::body::Body;
use tower::{Layer, Service};
use tower_http::cors::{AllowOrigin, Cors, CorsLayer};

/// The built page (`npm run build` in `web/`).
static BUNDLE: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/web-dist");

/// Hashed file names change with their content: a browser may keep them for a year.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Everything else (the HTML that names the hashed files) is revalidated on every load.
const REVALIDATE: &str = "no-cache";
/// The page fetches nothing from anywhere but this server.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page and the browser's access to the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "Browsers")]
pub struct WebSettings {
    /// Do not serve the web page (GET and HEAD then answer 404); gRPC-Web stays on.
    #[arg(
        long,
        env = "OANQUAN_NO_WEB",
        value_parser = crate::config::parse_switch,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value = "false",
        default_missing_value = "true"
    )]
    pub no_web: bool,

    /// Let pages served from ORIGIN (`https://example.org`, scheme, host and port only) call
    /// the API from a browser (CORS); repeat for several. The server's own page needs none.
    #[arg(
        long = "cors-origin",
        env = "OANQUAN_CORS_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = ',',
        value_parser = parse_origin
    )]
    pub cors_origins: Vec<HeaderValue>,

    /// Answer requests that name this server HOST (`play.example.org`; `*.example.org` for
    /// any name under it; `*` for any name at all); repeat for several. Requests that name
    /// it by an IP address or `localhost` are always answered. With this flag every request
    /// must name one of these; without it, only requests from this machine must (the page of
    /// another site, reaching 127.0.0.1 through DNS rebinding, names that site).
    #[arg(
        long = "allowed-host",
        env = "OANQUAN_ALLOWED_HOST",
        value_name = "HOST",
        value_delimiter = ',',
        value_parser = parse_allowed_host
    )]
    pub allowed_hosts: Vec<HostPattern>,
}

/// A name that `--allowed-host` lets requests use for this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: any name.
    Any,
    /// `play.example.org`: that name.
    Exact(String),
    /// `*.example.org`: any name that ends with `.example.org` (kept with its dot).
    Under(String),
}

/// An `--allowed-host`: a host name (letters, digits, `-` and `.`), in any case, with `*.`
/// in front for the names under it, or `*` alone.
///
/// # Errors
///
/// A message saying what is wrong with `text`.
pub fn parse_allowed_host(text: &str) -> Result<HostPattern, String> {
    let text = text.trim();
    if text == "*" {
        return Ok(HostPattern::Any);
    }
    let (under, name) = match text.strip_prefix("*.") {
        Some(name) => (true, name),
        None => (false, text),
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(
            "not a host name: write letters, digits, - and . only (as `play.example.org`), \
             `*.example.org` for the names under one, or `*` for any"
                .to_owned(),
        );
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("an IP address needs no --allowed-host: requests may always name one".into());
    }
    Ok(if under {
        HostPattern::Under(format!(".{name}"))
    } else {
        HostPattern::Exact(name)
    })
}

/// Which names requests may use for this server: the defence against DNS rebinding.
///
/// A page of another site can have its own name resolve to this server's address (127.0.0.1
/// above all, where a server on a player's machine listens and where the per-client limits
/// do not apply). The browser then takes the server for that site and lets the page call it;
/// but its requests still name that site in `Host`, and that is what this checks.
#[derive(Debug, Clone)]
pub struct HostCheck {
    patterns: Arc<[HostPattern]>,
}

/// A request [`HostCheck`] refuses, with the name it used when that is a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRefused {
    name: Option<String>,
    /// Whether `--allowed-host` takes the name as it is.
    allowable: bool,
}

impl std::fmt::Display for HostRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) if self.allowable => write!(
                f,
                "this server does not answer to the name `{name}`: use its IP address or \
                 localhost, or start it with --allowed-host {name}"
            ),
            Some(name) => write!(
                f,
                "this server does not answer to the name `{name}`, which is not one \
                 --allowed-host can allow: use its IP address or localhost"
            ),
            None => f.write_str(
                "this server does not answer to the host this request named: use its IP \
                 address or localhost, or a name given to it with --allowed-host",
            ),
        }
    }
}

impl HostCheck {
    /// The names `settings` allows.
    #[must_use]
    pub fn new(settings: &WebSettings) -> HostCheck {
        HostCheck {
            patterns: settings.allowed_hosts.clone().into(),
        }
    }

    /// Whether a request from `peer` to `local` (the connection's two addresses, `None` if
    /// unknown) with these `uri` and `headers` may be answered. A request that names no host
    /// is not a browser's, and is answered.
    ///
    /// # Errors
    ///
    /// [`HostRefused`] when it names a host that is not allowed, or two.
    pub fn admit(
        &self,
        peer: Option<std::net::IpAddr>,
        local: Option<std::net::IpAddr>,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Result<(), HostRefused> {
        // From or to loopback (a connection to 127.0.0.1 can only come from this machine,
        // whatever source address it was given), or to this machine's own address from that
        // address (a page can have its name resolve to the machine's network address as well
        // as to 127.0.0.1).
        let local = local.map(|local| local.to_canonical());
        let from_here = peer.is_some_and(|peer| {
            let peer = peer.to_canonical();
            peer.is_loopback() || local.is_some_and(|local| local.is_loopback() || local == peer)
        });
        if !from_here && self.patterns.is_empty() {
            return Ok(());
        }
        let refused = HostRefused {
            name: None,
            allowable: false,
        };
        let mut hosts = headers.get_all(header::HOST).iter();
        let (first, second) = (hosts.next(), hosts.next());
        if second.is_some() {
            // RFC 9112 § 3.2: a request with two is answered 400; no browser sends one.
            return Err(refused);
        }
        let authority = match uri.authority() {
            Some(authority) => std::borrow::Cow::Borrowed(authority),
            None => match first {
                None => return Ok(()),
                Some(value) => match value
                    .to_str()
                    .ok()
                    .and_then(|text| text.parse::<http::uri::Authority>().ok())
                {
                    Some(authority) => std::borrow::Cow::Owned(authority),
                    None => return Err(refused),
                },
            },
        };
        let host = authority.host();
        let host = host.strip_suffix('.').unwrap_or(host);
        if self.allows(host) {
            return Ok(());
        }
        // Quoted only when it is a host name (an `Authority` may hold `!$&'()*+,;=`).
        let name = host.to_ascii_lowercase();
        Err(match parse_allowed_host(&name) {
            Ok(HostPattern::Exact(allowed)) => HostRefused {
                allowable: allowed == name,
                name: Some(name),
            },
            _ => refused,
        })
    }

    fn allows(&self, host: &str) -> bool {
        // `[v6]` or `[v6%zone]`: zones are written `%25` in a URI, which the address's parser
        // does not take.
        let v6 = host
            .strip_prefix('[')
            .and_then(|host| host.strip_suffix(']'))
            .map(|inside| {
                inside
                    .split_once('%')
                    .map_or(inside, |(address, _)| address)
            });
        if v6.is_some_and(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok())
            || host.parse::<std::net::Ipv4Addr>().is_ok()
        {
            return true;
        }
        let host = host.to_ascii_lowercase();
        // Browsers resolve `localhost` and the names under it to loopback themselves.
        if host == "localhost" || host.ends_with(".localhost") {
            return true;
        }
        self.patterns.iter().any(|pattern| match pattern {
            HostPattern::Any => true,
            HostPattern::Exact(name) => host == *name,
            HostPattern::Under(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
        })
    }
}

/// An origin as browsers send it in `Origin`: `scheme://host[:port]`, nothing after.
///
/// # Errors
///
/// A message saying what is wrong with `text`.
pub fn parse_origin(text: &str) -> Result<HeaderValue, String> {
    let text = text.trim();
    let bad = |why: &str| Err(format!("not an origin ({why}): write https://host[:port]"));
    let Some((scheme, rest)) = text.split_once("://") else {
        return bad("no scheme");
    };
    if scheme != "http" && scheme != "https" {
        return bad("the scheme is not http or https");
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return bad("an origin has a host and a port only, no path");
    }
    // A browser sends the host in lower case and a port that fits 16 bits: any other origin
    // would never match, and CORS would fail with no word.
    let (host, port) = if let Some(end) = rest.find(']').filter(|_| rest.starts_with('[')) {
        let (host, after) = rest.split_at(end + 1);
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return bad("an origin has a host and a port only, no path"),
        }
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty() || host.chars().any(|c| c.is_ascii_uppercase()) {
        return bad("write the host in lower case, as browsers send it");
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|port| port > 0)
    {
        return bad("the port is not 1-65535");
    }
    HeaderValue::from_str(text).or_else(|_| bad("not visible ASCII"))
}

/// CORS for the origins `settings` allows: none by default, so only pages of this server
/// (same origin, which needs no CORS) can call the API from a browser.
pub fn cors_layer(settings: &WebSettings) -> OriginCorsLayer {
    let header = |name: &'static str| HeaderName::from_static(name);
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::list(settings.cors_origins.iter().cloned()))
        .allow_methods([Method::POST])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header("x-grpc-web"),
            header("x-user-agent"),
            header("grpc-timeout"),
        ])
        .expose_headers([
            header("grpc-status"),
            header("grpc-message"),
            header("grpc-status-details-bin"),
            header("x-request-id"),
        ])
        .max_age(Duration::from_secs(3600));
    OriginCorsLayer {
        cors: Arc::new(cors),
    }
}

/// CORS for the requests that carry an `Origin` header, which browsers send with every POST
/// and every preflight; requests without one (gRPC clients) skip it. For them CORS would only
/// add `Vary` to the response, and building those headers was a measurable share of a
/// `PlayMove`'s CPU (BENCHMARKS.md, issue 20). A POST response is not cached by HTTP caches,
/// so the `Vary` it would carry had nothing to say.
#[derive(Debug, Clone)]
pub struct OriginCorsLayer {
    cors: Arc<CorsLayer>,
}

impl<S> Layer<S> for OriginCorsLayer {
    type Service = OriginCors<S>;

    fn layer(&self, inner: S) -> OriginCors<S> {
        OriginCors {
            inner,
            cors: Arc::clone(&self.cors),
        }
    }
}

/// See [`OriginCorsLayer`]. The service stack is cloned for every request, and a `Cors`
/// service is cloned with its lists of origins and headers (allocations): this keeps the layer
/// behind an `Arc` and builds the `Cors` service only for the requests that need it.
#[derive(Debug, Clone)]
pub struct OriginCors<S> {
    inner: S,
    cors: Arc<CorsLayer>,
}

impl<S, B, ResBody> Service<Request<B>> for OriginCors<S>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Either<<Cors<S> as Service<Request<B>>>::Future, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // `Cors` only asks its inner service, so either path below may be called after this.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if request.headers().contains_key(header::ORIGIN) {
            // The service made ready above goes into `Cors`; a clone stays for the next call.
            let clone = self.inner.clone();
            let ready = std::mem::replace(&mut self.inner, clone);
            Either::Left(self.cors.layer(ready).call(request))
        } else {
            Either::Right(self.inner.call(request))
        }
    }
}

/// One file of the page, ready to send.
#[derive(Debug)]
struct Asset {
    body: Bytes,
    /// Only when it is smaller.
    gzip: Option<Bytes>,
    content_type: &'static str,
    cache_control: &'static str,
    etag: HeaderValue,
    /// The gzip body's own tag: another representation must not share a strong tag.
    gzip_etag: HeaderValue,
}

/// The page's files by URL path (`/` is `/index.html`).
#[derive(Debug, Default)]
struct Site {
    assets: HashMap<String, Asset>,
}

impl Site {
    fn embedded() -> Site {
        let mut site = Site::default();
        site.add_dir(&BUNDLE);
        site
    }

    fn add_dir(&mut self, dir: &Dir<'static>) {
        for file in dir.files() {
            let path = file.path().to_string_lossy().replace('\\', "/");
            let body = Bytes::from_static(file.contents());
            let content_type = content_type(&path);
            let gzip = compressible(content_type)
                .then(|| gzip(&body))
                .flatten()
                .filter(|zipped| zipped.len() < body.len());
            let cache_control = if path.starts_with("assets/") {
                IMMUTABLE
            } else {
                REVALIDATE
            };
            let hash = fnv1a(&body);
            let etag = HeaderValue::try_from(format!("\"{hash:016x}\""))
                .unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
            let gzip_etag = HeaderValue::try_from(format!("\"{hash:016x}-gz\""))
                .unwrap_or_else(|_| HeaderValue::from_static("\"0-gz\""));
            self.assets.insert(
                format!("/{path}"),
                Asset {
                    body,
                    gzip,
                    content_type,
                    cache_control,
                    etag,
                    gzip_etag,
                },
            );
        }
        for sub in dir.dirs() {
            self.add_dir(sub);
        }
    }

    fn asset(&self, path: &str) -> Option<&Asset> {
        self.assets.get(match path {
            "/" => "/index.html",
            path => path,
        })
    }

    fn respond<B>(&self, request: &Request<B>) -> Response<Body> {
        let Some(asset) = self.asset(request.uri().path()) else {
            return not_found();
        };
        let (body, etag) = match &asset.gzip {
            Some(zipped) if accepts_gzip(request.headers()) => (Some(zipped), &asset.gzip_etag),
            _ => (None, &asset.etag),
        };
        let mut response = Response::builder()
            .header(header::CONTENT_TYPE, asset.content_type)
            .header(header::CACHE_CONTROL, asset.cache_control)
            .header(header::ETAG, etag.clone())
            .header(header::VARY, "accept-encoding")
            .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
        if asset.content_type.starts_with("text/html") {
            response = response
                .header(header::CONTENT_SECURITY_POLICY, CSP)
                .header(header::REFERRER_POLICY, "no-referrer");
        }
        let fresh = request
            .headers()
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            // If-None-Match compares weakly (RFC 9110, 13.1.2): a W/ tag matches too.
            .map(|tag| tag.trim())
            .any(|tag| tag.strip_prefix("W/").unwrap_or(tag) == etag || tag == "*");
        if fresh {
            return response
                .status(StatusCode::NOT_MODIFIED)
                .body(Body::empty())
                .unwrap_or_else(|_| not_found());
        }
        let body = match body {
            Some(zipped) => {
                response = response.header(header::CONTENT_ENCODING, "gzip");
                zipped.clone()
            }
            None => asset.body.clone(),
        };
        response = response.header(header::CONTENT_LENGTH, body.len());
        let body = if request.method() == Method::HEAD {
            Body::empty()
        } else {
            Body::new(http_body_util::Full::new(body))
        };
        response.body(body).unwrap_or_else(|_| not_found())
    }
}

fn not_found() -> Response<Body> {
    plain_text(StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n"))
}

/// The page refused to a name [`HostCheck`] does not allow: the reason, as text.
fn forbidden(refused: &HostRefused) -> Response<Body> {
    plain_text(StatusCode::FORBIDDEN, Bytes::from(format!("{refused}\n")))
}

/// A POST (or PUT, DELETE, OPTIONS...) to one of the page's own files: the file exists, the
/// method does not apply (RFC 9110, 15.5.6), so a client is told which ones do.
fn method_not_allowed() -> Response<Body> {
    let mut response = plain_text(
        StatusCode::METHOD_NOT_ALLOWED,
        Bytes::from_static(b"method not allowed: the page's files are read with GET or HEAD\n"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// A short answer in plain text, which a browser must not read as anything else.
fn plain_text(status: StatusCode, text: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::new(http_body_util::Full::new(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("webmanifest") => "application/manifest+json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || content_type.starts_with("application/json")
        || content_type.starts_with("application/manifest")
        || content_type == "image/svg+xml"
}

fn gzip(data: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

/// `Accept-Encoding` names gzip (or `*`) without `q=0`.
fn accepts_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|param| {
                param
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
}

/// A content hash for ETags, stable across builds (unlike `DefaultHasher`).
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Answers GET and HEAD with the page (or 404 without it); passes everything else on.
#[derive(Debug, Clone)]
pub struct WebLayer {
    site: Option<Arc<Site>>,
    hosts: HostCheck,
}

impl WebLayer {
    /// The embedded page, or none under `--no-web`. Compresses the files once, here.
    pub fn new(settings: &WebSettings) -> WebLayer {
        WebLayer {
            site: (!settings.no_web).then(|| Arc::new(Site::embedded())),
            hosts: HostCheck::new(settings),
        }
    }
}

impl<S> Layer<S> for WebLayer {
    type Service = Web<S>;

    fn layer(&self, inner: S) -> Web<S> {
        Web {
            inner,
            site: self.site.clone(),
            hosts: self.hosts.clone(),
        }
    }
}

/// See [`WebLayer`].
#[derive(Debug, Clone)]
pub struct Web<S> {
    inner: S,
    site: Option<Arc<Site>>,
    hosts: HostCheck,
}

impl<S, B> Service<Request<B>> for Web<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, std::future::Ready<Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            answer_text_in_text(request.headers_mut());
            // gRPC paths (`/package.Service/Method`) never name one of the page's files.
            let page_file = self
                .site
                .as_ref()
                .is_some_and(|site| site.asset(request.uri().path()).is_some());
            if page_file {
                return Either::Right(std::future::ready(Ok(method_not_allowed())));
            }
            return Either::Left(self.inner.call(request));
        }
        let (peer, local) = crate::peer::connection_ips(&request);
        let response = match (
            &self.site,
            self.hosts
                .admit(peer, local, request.uri(), request.headers()),
        ) {
            (_, Err(refused)) => forbidden(&refused),
            (Some(site), Ok(())) => site.respond(&request),
            (None, Ok(())) => not_found(),
        };
        Either::Right(std::future::ready(Ok(response)))
    }
}

/// gRPC-Web's translation answers in text only for an `Accept` of exactly the text type, and
/// in binary otherwise; a text client (one that cannot read binary bodies) that sends none, or
/// a list, got bytes it could not decode. A text request is answered in text unless its
/// `Accept` takes binary gRPC-Web and not text (media types read without case, `q=0` as no).
fn answer_text_in_text(headers: &mut http::HeaderMap) {
    const TEXT: &str = "application/grpc-web-text";
    let is_text = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with(TEXT));
    if !is_text {
        return;
    }
    let accepted: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';');
            let media = parts.next()?.trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (!refused).then_some(media)
        })
        .collect();
    let takes = |media: &[&str]| accepted.iter().any(|a| media.contains(&a.as_str()));
    let binary_only = takes(&["application/grpc-web", "application/grpc-web+proto"])
        && !takes(&[TEXT, "application/grpc-web-text+proto"]);
    if !binary_only {
        headers.insert(header::ACCEPT, http::HeaderValue::from_static(TEXT));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cors_applies_only_to_requests_with_an_origin() {
        use tower::ServiceExt as _;
        let settings = WebSettings {
            cors_origins: vec![parse_origin("https://play.example").unwrap()],
            ..WebSettings::default()
        };
        let service = cors_layer(&settings).layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        }));
        let call = |origin: Option<&'static str>| {
            let mut request = Request::builder().method(Method::POST).uri("/x");
            if let Some(origin) = origin {
                request = request.header(header::ORIGIN, origin);
            }
            service.clone().oneshot(request.body(()).unwrap())
        };
        let bare = call(None).await.unwrap();
        assert!(bare.headers().get(header::VARY).is_none(), "{bare:?}");
        assert!(
            bare.headers()
                .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
                .is_none()
        );
        let browser = call(Some("https://play.example")).await.unwrap();
        assert_eq!(
            browser.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://play.example"
        );
        assert!(browser.headers().get(header::VARY).is_some(), "{browser:?}");
        let other = call(Some("https://elsewhere.example")).await.unwrap();
        assert!(
            other
                .headers()
                .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
                .is_none()
        );
    }

    fn hosts(allowed: &[&str]) -> HostCheck {
        HostCheck::new(&WebSettings {
            allowed_hosts: allowed
                .iter()
                .map(|text| parse_allowed_host(text).unwrap())
                .collect(),
            ..WebSettings::default()
        })
    }

    /// What a request naming `host` in its `Host` header from `peer` gets.
    fn admit(check: &HostCheck, peer: &str, host: &[u8]) -> Result<(), String> {
        let mut headers = http::HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_bytes(host).unwrap());
        let uri = http::Uri::from_static("/oanquan.v1.GameService/CreateGame");
        check
            .admit(Some(peer.parse().unwrap()), None, &uri, &headers)
            .map_err(|refused| refused.to_string())
    }

    #[test]
    fn a_request_from_this_machine_must_name_it_by_address_or_localhost() {
        let check = hosts(&[]);
        for host in [
            &b"127.0.0.1:50051"[..],
            b"127.0.0.1",
            b"[::1]:50051",
            b"localhost:50051",
            b"LocalHost.:1",
            b"game.localhost:8080",
            b"10.1.2.3:50051",
        ] {
            assert_eq!(admit(&check, "127.0.0.1", host), Ok(()), "{host:?}");
            assert_eq!(admit(&check, "::ffff:127.0.0.1", host), Ok(()), "{host:?}");
        }
        // What a page of another site that rebound its name to 127.0.0.1 sends.
        let refused = admit(&check, "127.0.0.1", b"evil.example:50051").unwrap_err();
        assert!(refused.contains("`evil.example`"), "{refused}");
        assert!(refused.contains("--allowed-host evil.example"), "{refused}");
        for host in [
            &b"127.0.0.1.nip.io:50051"[..],
            b"localhost.evil.example",
            b"evillocalhost",
            b"0x7f.1",
        ] {
            assert!(admit(&check, "::1", host).is_err(), "{host:?}");
        }
        // Not even a host: refused, and not quoted.
        let refused = admit(&check, "127.0.0.1", b"a b\xff").unwrap_err();
        assert!(!refused.contains("a b"), "{refused}");
        // Not addresses: bracketed names, and names the flag could not allow are not offered.
        for host in [&b"[evil.example]"[..], b"[evil]:80", b"[::1"] {
            assert!(admit(&check, "127.0.0.1", host).is_err(), "{host:?}");
        }
        assert_eq!(admit(&check, "::1", b"[fe80::1%25eth0]:80"), Ok(()));
        for host in [
            &b"my_host.lan"[..],
            b"a!$&'()*+,;=b",
            b"evil.example..",
            b":80",
        ] {
            let refused = admit(&check, "127.0.0.1", host).unwrap_err();
            assert!(!refused.contains("start it with"), "{host:?}: {refused}");
        }
        // Two names: refused, whichever comes first.
        let mut headers = http::HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("127.0.0.1"));
        headers.append(header::HOST, HeaderValue::from_static("evil.example"));
        let uri = http::Uri::from_static("/");
        let from_here = Some("127.0.0.1".parse().unwrap());
        assert!(check.admit(from_here, None, &uri, &headers).is_err());
        // To this machine's own network address from that address: from this machine.
        let own = Some("192.0.2.2".parse().unwrap());
        let mut headers = http::HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("evil.example"));
        assert!(check.admit(own, own, &uri, &headers).is_err());
        let other = Some("192.0.2.3".parse().unwrap());
        assert_eq!(check.admit(other, own, &uri, &headers), Ok(()));
        // To loopback from one of the machine's other addresses (`curl --interface`).
        let to_loopback = Some("::1".parse().unwrap());
        assert!(check.admit(own, to_loopback, &uri, &headers).is_err());
        // From elsewhere any name is answered while no --allowed-host is given.
        assert_eq!(admit(&check, "192.0.2.7", b"evil.example"), Ok(()));
        assert_eq!(admit(&check, "192.0.2.7", b"a b\xff"), Ok(()));
    }

    #[test]
    fn allowed_hosts_are_required_of_every_request() {
        let check = hosts(&["Play.Example.org.", "*.games.example"]);
        for peer in ["127.0.0.1", "192.0.2.7", "2001:db8::1"] {
            for host in [
                &b"play.example.org"[..],
                b"PLAY.example.org.:443",
                b"a.games.example",
                b"a.b.games.example:8443",
                b"192.0.2.1",
                b"localhost",
            ] {
                assert_eq!(admit(&check, peer, host), Ok(()), "{peer} {host:?}");
            }
            for host in [
                &b"example.org"[..],
                b"games.example",
                b"xgames.example",
                b"play.example.org.evil",
            ] {
                assert!(admit(&check, peer, host).is_err(), "{peer} {host:?}");
            }
        }
        let any = hosts(&["*"]);
        assert_eq!(admit(&any, "127.0.0.1", b"evil.example"), Ok(()));
        // HTTP/2 names the host in the URI (`:authority`), not in a header.
        let uri = http::Uri::from_static("http://evil.example:50051/oanquan.v1.GameService/X");
        let from_here = Some("127.0.0.1".parse().unwrap());
        assert!(
            check
                .admit(from_here, None, &uri, &http::HeaderMap::new())
                .is_err()
        );
        // No host at all is not a browser's request.
        let uri = http::Uri::from_static("/oanquan.v1.GameService/X");
        assert_eq!(
            check.admit(from_here, None, &uri, &http::HeaderMap::new()),
            Ok(())
        );
    }

    #[test]
    fn allowed_host_flags_are_host_names() {
        assert_eq!(parse_allowed_host("*"), Ok(HostPattern::Any));
        assert_eq!(
            parse_allowed_host(" Play.Example.ORG. "),
            Ok(HostPattern::Exact("play.example.org".into()))
        );
        assert_eq!(
            parse_allowed_host("*.example.org"),
            Ok(HostPattern::Under(".example.org".into()))
        );
        for bad in [
            "",
            ".",
            "*.",
            "**",
            "a..b",
            "-a.b",
            "a-.b",
            "a_b.c",
            "a b",
            "https://a.b",
            "a.b:80",
            "*.*.a",
            "é.vn",
            "127.0.0.1",
            "[::1]",
        ] {
            assert!(parse_allowed_host(bad).is_err(), "{bad:?}");
        }
        assert!(parse_allowed_host(&"a".repeat(64)).is_err());
        assert!(parse_allowed_host(&["a"; 128].join(".")).is_err());
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert!(parse_origin("https://example.org").is_ok());
        assert!(parse_origin("http://127.0.0.1:5173").is_ok());
        assert!(parse_origin("example.org").is_err());
        assert!(parse_origin("https://example.org/").is_err());
        assert!(parse_origin("ftp://example.org").is_err());
        assert!(parse_origin("https://").is_err());
        assert!(parse_origin("http://a:99999").is_err());
        assert!(parse_origin("http://a:0").is_err());
        assert!(parse_origin("http://a:").is_err());
        assert!(parse_origin("https://Example.org").is_err());
        assert!(parse_origin("http://[::1]:8080").is_ok());
        assert!(parse_origin("http://[::1]").is_ok());
    }

    #[test]
    fn gzip_is_accepted_unless_refused() {
        let accepts = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            accepts_gzip(&headers)
        };
        assert!(accepts("gzip, deflate, br"));
        assert!(accepts("br;q=1.0, gzip;q=0.8"));
        assert!(accepts("*"));
        assert!(!accepts("gzip;q=0"));
        assert!(!accepts("br, identity"));
    }

    #[test]
    fn the_bundle_has_an_index_and_hashed_assets() {
        let site = Site::embedded();
        let index = &site.assets["/index.html"];
        assert!(index.content_type.starts_with("text/html"));
        assert_eq!(index.cache_control, REVALIDATE);
        assert!(
            site.assets
                .iter()
                .any(|(path, asset)| path.ends_with(".js") && asset.cache_control == IMMUTABLE)
        );
    }
}
