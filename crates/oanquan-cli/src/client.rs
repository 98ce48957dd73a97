//! Connecting to the server.

use std::time::Duration;

use oanquan_proto::v1::game_service_client::GameServiceClient;
use oanquan_proto::v1::rules_service_client::RulesServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::error::{CliError, code};

/// The two service clients over one HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Clients {
    pub games: GameServiceClient<Channel>,
    pub rules: RulesServiceClient<Channel>,
}

/// How long one unary request may take before the client calls the server unavailable. Streams
/// are not bounded by this (they live as long as the game), only by the HTTP/2 keepalive below.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

fn endpoint(server: &str) -> Result<Endpoint, CliError> {
    let uri = if server.contains("://") {
        server.to_owned()
    } else {
        // `host:port` is what people type; tonic wants a URI.
        format!("http://{server}")
    };
    let endpoint = Endpoint::from_shared(uri).map_err(|e| {
        CliError::new(
            code::USAGE,
            format!("--server `{server}` is not a valid address: {e}"),
        )
    })?;
    Ok(endpoint
        .connect_timeout(Duration::from_secs(5))
        // A half-open connection (a cable pulled, a proxy gone) would otherwise leave a watch
        // waiting forever; pings notice it within about 20 seconds.
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true)
        .tcp_nodelay(true))
}

/// Opens a connection. Failing to connect is exit code 69.
pub async fn connect(server: &str) -> Result<Clients, CliError> {
    let channel = endpoint(server)?
        .connect()
        .await
        .map_err(|e| CliError::unavailable(server, error_chain(&e)))?;
    Ok(Clients {
        games: GameServiceClient::new(channel.clone()),
        rules: RulesServiceClient::new(channel),
    })
}

/// A unary request with the client's timeout.
pub fn request<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(REQUEST_TIMEOUT);
    request
}

/// A unary request carrying a seat's bearer token.
pub fn authed<T>(message: T, token: &str) -> Result<tonic::Request<T>, CliError> {
    let mut request = request(message);
    let value = format!("Bearer {token}").parse().map_err(|_| {
        CliError::new(
            code::AUTH,
            "the stored token is not a valid header value; join the game again",
        )
    })?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

/// tonic's transport errors say "transport error" at the top and the useful part (connection
/// refused, ...) in their sources.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_bare_host_port() {
        assert!(endpoint("127.0.0.1:50051").is_ok());
        assert!(endpoint("http://[::1]:1").is_ok());
        assert_eq!(
            endpoint("http://exa mple").map(|_| ()).map_err(|e| e.code),
            Err(code::USAGE)
        );
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
