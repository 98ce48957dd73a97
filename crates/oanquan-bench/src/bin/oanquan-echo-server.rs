//! `oanquan-echo-server`: the baseline of the load benchmark. A bare tonic server with one
//! unary method that replies with as many bytes as asked, so that `oanquan-bench` can send it
//! the same bytes as `PlayMove` calls and compare. It runs as its own process, like
//! `oanquan-server`, so that its CPU time and memory are measured the same way.
//!
//! Prints `oanquan-echo-server listening on <ip:port>` on stdout once bound; stops on SIGINT or
//! SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Parser;
use oanquan_bench::echo::echo_service_server::{EchoService, EchoServiceServer};
use oanquan_bench::echo::{EchoRequest, EchoResponse};
use prost::bytes::Bytes;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// The same allocator as `oanquan-server`'s, so that the benchmark compares the game server with
/// tonic itself and not glibc's malloc with mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The bare tonic echo server that `oanquan-bench` measures `oanquan-server` against.
///
/// It serves one unary method that replies with as many zero bytes as the request asks for (at
/// most 1 MiB): gRPC over HTTP/2 with no storage, no rules and no limit but the stream count, so
/// the benchmark can tell what the game server costs on top of tonic itself. `oanquan-bench`
/// starts and stops it by itself; run it by hand only to look at the baseline alone.
///
/// Prints `oanquan-echo-server listening on ADDR` on stdout once bound; stops on SIGINT or
/// SIGTERM.
// No bare `about` in `command(...)`: it would show the crate's description, which is the load
// benchmark's, instead of this text.
#[derive(Debug, Parser)]
#[command(name = "oanquan-echo-server", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// HTTP/2 streams per connection (the real server defaults to 128).
    #[arg(long, default_value_t = 1024)]
    max_concurrent_streams: u32,
}

/// Largest reply served: replies are slices of one zeroed buffer.
const MAX_REPLY: usize = 1 << 20;

#[derive(Debug)]
struct Echo {
    zeros: Bytes,
}

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoResponse>, Status> {
        let size = (request.get_ref().reply_size as usize).min(MAX_REPLY);
        Ok(Response::new(EchoResponse {
            payload: self.zeros.slice(..size),
        }))
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "oanquan-echo-server listening on {local}")?;
        stdout.flush()?;
    }
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let echo = Echo {
        zeros: Bytes::from(vec![0_u8; MAX_REPLY]),
    };
    Server::builder()
        .max_concurrent_streams(args.max_concurrent_streams)
        .add_service(EchoServiceServer::new(echo))
        .serve_with_incoming_shutdown(incoming, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("oanquan-echo-server: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("oanquan-echo-server: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
