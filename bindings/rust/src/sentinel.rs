//! The `sentinel` feature: the master Redis Sentinels name, found again at each connection
//! attempt of the node's link.
//!
//! The Sentinels are asked in turn, each bounded by the core's
//! [`redlock_core::SENTINEL_QUERY_TIMEOUT_DEFAULT_MS`] (or the user's
//! [`crate::ClientBuilder::sentinel_query_timeout`]) to connect (TCP, TLS, `AUTH`) and name
//! the master. One that refuses, fails or is past its bound is skipped and the next one is
//! asked, so a Sentinel that hangs (a stopped process, a black-holed host) does not keep
//! the node from the master the others name. The link's connect timeout allows for it:
//! [`redlock_core::sentinel_connect_timeout_ms`], every Sentinel's bound in turn, then the
//! master's connection.
//!
//! The checks are those the `redis` crate's `SentinelClient` made before: a Sentinel must
//! say it is one (`ROLE`), the master it names must be flagged `master` and not down
//! (`s_down`, `o_down`), and the master must say it is one (`ROLE`, or `INFO replication`
//! where `ROLE` is unknown). A master that fails to connect or is not a master sends the
//! lookup on to the next Sentinel too.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{IntoConnectionInfo, RedisError, Role};
use redlock_core::LinkCause;

use crate::node::{connection_config, link_cause};

/// The Sentinels of a node, in the order given, and the service whose master they name.
pub(crate) struct Sentinels {
    /// Each Sentinel's client, with its URL (any password replaced by `***`) for messages.
    sentinels: Vec<(redis::Client, String)>,
    service: String,
    /// The bound of one Sentinel's connection and answer.
    query_timeout: Duration,
    /// How to log in to the master (`AUTH`, `SELECT`), as the user set it.
    master: redis::RedisConnectionInfo,
}

/// Why a connection or a lookup failed: the link's cause, and the text.
type Failure = (LinkCause, String);

fn failure(error: RedisError) -> Failure {
    (link_cause(&error), error.to_string())
}

impl Sentinels {
    pub(crate) fn new(
        sentinels: Vec<(redis::Client, String)>,
        service: String,
        query_timeout: Duration,
        master: redis::RedisConnectionInfo,
    ) -> Sentinels {
        Sentinels {
            sentinels,
            service,
            query_timeout,
            master,
        }
    }

    /// A connection to the master, found through the Sentinels in turn. When none leads
    /// to it, the failure's cause is that of the last master that could not be reached
    /// (as the `redis` crate ranked them), else that of the last Sentinel, and its text
    /// gives each Sentinel's answer.
    pub(crate) async fn open_master(&self) -> Result<MultiplexedConnection, Failure> {
        let mut answers = Vec::with_capacity(self.sentinels.len());
        let mut master_cause = None;
        let mut last_cause = LinkCause::Closed;
        for (client, label) in &self.sentinels {
            let (host, port) =
                match tokio::time::timeout(self.query_timeout, self.ask(client)).await {
                    Ok(Ok(address)) => address,
                    Ok(Err((cause, text))) => {
                        answers.push(format!("{label}: {}: {text}", cause.code()));
                        last_cause = cause;
                        continue;
                    }
                    Err(_) => {
                        answers.push(format!(
                            "{label}: timeout: no answer within {} ms",
                            self.query_timeout.as_millis()
                        ));
                        last_cause = LinkCause::Timeout;
                        continue;
                    }
                };
            // The master's connection is bounded by the link's connect timeout, which
            // leaves it the client's connect timeout after every Sentinel's bound.
            match open_checked_master(&host, port, &self.master).await {
                Ok(connection) => return Ok(connection),
                Err((cause, text)) => {
                    answers.push(format!(
                        "{label}: master {host}:{port}: {}: {text}",
                        cause.code()
                    ));
                    if cause == LinkCause::Closed && text == NOT_A_MASTER {
                        last_cause = cause;
                    } else {
                        master_cause = Some(cause);
                    }
                }
            }
        }
        Err((
            master_cause.unwrap_or(last_cause),
            format!(
                "no Sentinel led to the master of {:?} ({})",
                self.service,
                answers.join("; ")
            ),
        ))
    }

    /// Connects to one Sentinel, checks that it is one, and asks it for the master's
    /// address (`SENTINEL MASTER`: the master's flags as well as its address).
    async fn ask(&self, client: &redis::Client) -> Result<(String, u16), Failure> {
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&connection_config())
            .await
            .map_err(failure)?;
        let role: Role = redis::cmd("ROLE")
            .query_async(&mut connection)
            .await
            .map_err(failure)?;
        if !matches!(role, Role::Sentinel { .. }) {
            return Err((
                LinkCause::Closed,
                String::from("not a Sentinel (ROLE says otherwise)"),
            ));
        }
        let master: HashMap<String, String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.service)
            .query_async(&mut connection)
            .await
            .map_err(failure)?;
        let flags = master.get("flags").map(String::as_str).unwrap_or_default();
        let address = match (master.get("ip"), master.get("port")) {
            (Some(ip), Some(port)) => port.parse::<u16>().ok().map(|port| (ip.clone(), port)),
            _ => None,
        };
        match address {
            Some(address)
                if flags.split(',').any(|flag| flag == "master")
                    && !flags.contains("s_down")
                    && !flags.contains("o_down") =>
            {
                Ok(address)
            }
            Some((ip, port)) => Err((
                LinkCause::Closed,
                format!("names {ip}:{port}, which it flags {flags:?} (not an available master)"),
            )),
            None => Err((
                LinkCause::Closed,
                String::from("names no master address (ip and port)"),
            )),
        }
    }
}

const NOT_A_MASTER: &str = "not a master (ROLE or INFO replication says otherwise)";

/// Connects to the master a Sentinel named (plain TCP, then `AUTH` and `SELECT` as
/// `master` says) and checks that it is one: `ROLE`, else `INFO replication`'s `role:`
/// where `ROLE` is unknown.
async fn open_checked_master(
    host: &str,
    port: u16,
    master: &redis::RedisConnectionInfo,
) -> Result<MultiplexedConnection, Failure> {
    let info = (host, port)
        .into_connection_info()
        .map_err(failure)?
        .set_redis_settings(master.clone());
    let client = redis::Client::open(info).map_err(failure)?;
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&connection_config())
        .await
        .map_err(failure)?;
    let is_master = match redis::cmd("ROLE")
        .query_async::<Role>(&mut connection)
        .await
    {
        Ok(role) => matches!(role, Role::Primary { .. }),
        Err(role_error) => {
            let info = redis::cmd("INFO")
                .arg("REPLICATION")
                .query_async::<String>(&mut connection)
                .await;
            match info {
                Ok(info) => info.lines().any(|line| line.trim_end() == "role:master"),
                // As the `redis` crate ranked them: ROLE's error unless it was an error
                // reply (an unknown command), then the fallback's.
                Err(info_error) if matches!(role_error.kind(), redis::ErrorKind::Server(_)) => {
                    return Err(failure(info_error))
                }
                Err(_) => return Err(failure(role_error)),
            }
        }
    };
    if is_master {
        Ok(connection)
    } else {
        Err((LinkCause::Closed, String::from(NOT_A_MASTER)))
    }
}
