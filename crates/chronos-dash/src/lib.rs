//! The chronos-rs web console (`chronos dash`): which queue is backing up, what failed and
//! why, which schedule fires next and who leads, and the operator's actions on them.
//!
//! Pages are rendered on the server over [`chronos_admin`] (one bounded call per page part, so a
//! page of a queue with a million tasks costs what a page of an empty one does); a little
//! JavaScript polls JSON at most once a second for live counts and draws the throughput chart.
//! Every asset is embedded in the binary: nothing is fetched from the network.
//!
//! Safe by default:
//! - it refuses to listen on a non-loopback address without a token; with a token, a person
//!   logs in once (a cookie, `HttpOnly`, `SameSite=Strict`) and a scraper sends
//!   `Authorization: Bearer <token>`;
//! - a console without a token answers only requests addressed to a loopback host name, so a
//!   web page that rebinds its DNS name to 127.0.0.1 cannot read it;
//! - every action is a POST carrying a CSRF token, refused when its `Origin` is another site,
//!   and logged (who, what, how many) through `tracing`, as is every refused login;
//! - login attempts are spaced one second apart after a failure across all connections
//!   (parallel guesses wait in line), and the token is compared by digest in constant time;
//! - the session cookie is `Secure` when the console is reached over https (a proxy's
//!   `X-Forwarded-Proto`) or [`DashConfig::secure_cookie`] says so;
//! - `/healthz` tells an anonymous visitor only `ok` or `unavailable`; the reason is for those
//!   logged in;
//! - [`DashConfig::read_only`] hides every action and refuses its POST;
//! - a strict Content-Security-Policy (no inline script or style, nothing from elsewhere);
//! - the Redis URL is shown without its password and secret query parameters
//!   ([`chronos_admin::redact_url`]).
//!
//! Bulk actions ("archive every retry task matching this filter") are confirmed with an honest
//! count (a range when counting stopped early), then run in the background with a progress page
//! and a cancel button. With Redis down every page answers at once with the reason (connection
//! refused, ...) instead of waiting for a timeout. An unknown queue is a 404 naming the queues
//! that exist.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let admin = chronos_admin::connect("redis://127.0.0.1:6379", "chronos").await?;
//! let dash = chronos_dash::Dash::new(admin, chronos_dash::DashConfig::default())?;
//! dash.serve(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod actions;
mod api;
mod config;
mod error;
mod error_page;
mod fields;
mod format;
mod health;
mod href;
mod jobs;
mod live;
mod metrics;
mod notice;
mod pages;
mod rates;
mod security;
mod server;
mod state;

pub use config::DashConfig;
pub use error::DashError;
pub use server::Dash;
