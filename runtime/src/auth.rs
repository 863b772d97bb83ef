//! HTTP basic authentication of the REST API (`rest.auth.users.file`).
//!
//! The users file has one `user:hash` per line (blank lines and `#`
//! comments skipped); each hash is an Argon2 hash in the standard PHC string
//! format (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`), as `sluice passwd`
//! writes it. Plain-text passwords are refused when the file is loaded.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

/// Argon2 verifications at once, whatever the number of requests: each
/// takes a core for tens of milliseconds, on the blocking pool that
/// transforms and commits use too.
const CONCURRENT_VERIFICATIONS: usize = 1;
/// How long a request waits for its turn to be verified before a 503.
const VERIFICATION_WAIT: Duration = Duration::from_secs(10);
/// After each verification its turn stays taken this many times as long
/// again: a flood of guesses gets at most a quarter of one core, and the
/// pipelines keep the rest.
const VERIFICATION_REST_FACTOR: u32 = 3;
/// A refusal from memory (the same wrong credentials again) is answered
/// this late: a client retrying in a tight loop then costs the worker a
/// request a second, not a core.
const REFUSAL_DELAY: Duration = Duration::from_secs(1);
/// A verification's verdict is remembered this long (good credentials
/// this long after their last use), so a client polling with good
/// credentials, or retrying the same wrong ones (a stale secret in a
/// script), costs a SHA-256, not an Argon2 hash. Only a new guess costs a
/// verification.
const REMEMBERED_FOR: Duration = Duration::from_secs(60);
/// Most credentials remembered at once.
const REMEMBERED_MAX: usize = 1024;

/// The users allowed in, with their password hashes.
pub struct BasicAuth {
    /// User name to its PHC hash string (checked parseable at load).
    users: BTreeMap<String, String>,
    /// `/health` answers without credentials (`rest.auth.health.open`).
    health_open: bool,
    /// Turns to run an Argon2 verification.
    turns: tokio::sync::Semaphore,
    /// SHA-256 of `user:password` verified: the verdict, until when.
    remembered: std::sync::Mutex<HashMap<[u8; 32], (bool, Instant)>>,
    /// Argon2 verifications run, and the most ever at once (for tests).
    verifications: AtomicUsize,
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
}

impl BasicAuth {
    /// Loads and checks the users file; the error names the file and line.
    pub fn load(file: &Path, health_open: bool) -> Result<Self, String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("rest.auth.users.file: reading {}: {e}", file.display()))?;
        Self::parse(&text, health_open)
            .map_err(|e| format!("rest.auth.users.file: {}: {e}", file.display()))
    }

    pub fn parse(text: &str, health_open: bool) -> Result<Self, String> {
        let mut users = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = i + 1;
            let (user, hash) = line
                .split_once(':')
                .ok_or_else(|| format!("line {n}: expected USER:HASH"))?;
            if user.is_empty() {
                return Err(format!("line {n}: the user name is empty"));
            }
            let parsed = PasswordHash::new(hash).map_err(|e| {
                format!(
                    "line {n}: the password of `{user}` is not an Argon2 hash in PHC format ($argon2id$...): {e}; \
                     create one with `sluice passwd {user}` (plain-text passwords are refused)"
                )
            })?;
            if !parsed.algorithm.as_str().starts_with("argon2") {
                return Err(format!(
                    "line {n}: the password of `{user}` is hashed with `{}`; expected argon2id, argon2i or argon2d",
                    parsed.algorithm
                ));
            }
            if users.insert(user.to_string(), hash.to_string()).is_some() {
                return Err(format!("line {n}: user `{user}` appears twice"));
            }
        }
        if users.is_empty() {
            return Err("no users: every request would be refused".into());
        }
        Ok(Self {
            users,
            health_open,
            turns: tokio::sync::Semaphore::new(CONCURRENT_VERIFICATIONS),
            remembered: std::sync::Mutex::new(HashMap::new()),
            verifications: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
        })
    }

    /// Whether `user` with `password` is let in: remembered credentials at
    /// once, others by an Argon2 verification in turn (at most
    /// [`CONCURRENT_VERIFICATIONS`] at a time, off the async threads).
    /// `None` when no turn came within [`VERIFICATION_WAIT`].
    pub async fn check(self: &Arc<Self>, user: &str, password: &str) -> Option<bool> {
        let key: [u8; 32] = Sha256::digest(format!("{user}:{password}")).into();
        let now = Instant::now();
        let remembered = {
            let mut remembered = self.remembered.lock().expect("remembered lock");
            match remembered.get_mut(&key) {
                Some((verdict, until)) if *until > now => {
                    // Good credentials in use stay remembered: a client
                    // polling through a flood of guesses never waits behind
                    // them.
                    if *verdict {
                        *until = now + REMEMBERED_FOR;
                    }
                    Some(*verdict)
                }
                _ => None,
            }
        };
        match remembered {
            Some(true) => Some(true),
            Some(false) => {
                tokio::time::sleep(REFUSAL_DELAY).await;
                Some(false)
            }
            None => self.verify_in_turn(key, user, password).await,
        }
    }

    /// An Argon2 verification when a turn comes (or `None` after
    /// [`VERIFICATION_WAIT`]); its verdict is remembered.
    async fn verify_in_turn(
        self: &Arc<Self>,
        key: [u8; 32],
        user: &str,
        password: &str,
    ) -> Option<bool> {
        let now = Instant::now();
        let _turn = tokio::time::timeout(VERIFICATION_WAIT, self.turns.acquire())
            .await
            .ok()?
            .ok()?;
        let (me, user, password) = (self.clone(), user.to_string(), password.to_string());
        let started = Instant::now();
        let ok = tokio::task::spawn_blocking(move || {
            let now_in_flight = me.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            me.peak_in_flight.fetch_max(now_in_flight, Ordering::SeqCst);
            me.verifications.fetch_add(1, Ordering::SeqCst);
            let ok = me.verify(&user, &password);
            me.in_flight.fetch_sub(1, Ordering::SeqCst);
            ok
        })
        .await
        .unwrap_or(false);
        {
            let mut remembered = self.remembered.lock().expect("remembered lock");
            if remembered.len() >= REMEMBERED_MAX {
                remembered.retain(|_, (_, until)| *until > now);
                if remembered.len() >= REMEMBERED_MAX {
                    remembered.clear();
                }
            }
            remembered.insert(key, (ok, Instant::now() + REMEMBERED_FOR));
        }
        tokio::time::sleep(started.elapsed() * VERIFICATION_REST_FACTOR).await;
        Some(ok)
    }

    /// Argon2 verifications run so far, and the most at once.
    pub fn verification_counts(&self) -> (usize, usize) {
        (
            self.verifications.load(Ordering::SeqCst),
            self.peak_in_flight.load(Ordering::SeqCst),
        )
    }

    /// Whether `user` with `password` is let in. A user who does not exist
    /// costs as much as a wrong password (one hash verified either way).
    pub fn verify(&self, user: &str, password: &str) -> bool {
        // A fixed hash of an unguessable password, for unknown users.
        const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$0gQb8nIkNJG9CT+uUSTW4Q$rV0OlS22UT4eSBzOlKLSlUjDPindYa53XORwr9DEplU";
        let (hash, known) = match self.users.get(user) {
            Some(h) => (h.as_str(), true),
            None => (DECOY, false),
        };
        let Ok(parsed) = PasswordHash::new(hash) else {
            return false;
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        ok && known
    }
}

/// An Argon2id hash in PHC format of `password`, with a random salt.
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| format!("making a salt: {e}"))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing the password: {e}"))
}

fn unauthorized(message: &str) -> Response {
    let body = serde_json::json!({"error_code": 401, "message": message});
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"sluice\", charset=\"UTF-8\"",
        )],
        axum::Json(body),
    )
        .into_response()
}

/// The middleware: 401 with `WWW-Authenticate` unless the request carries
/// the credentials of a user in the file.
pub async fn require(State(auth): State<Arc<BasicAuth>>, request: Request, next: Next) -> Response {
    if auth.health_open && request.uri().path() == "/health" {
        return next.run(request).await;
    }
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return unauthorized("authentication required: HTTP basic credentials");
    };
    let credentials = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Basic ")
                .or_else(|| v.strip_prefix("basic "))
        })
        .and_then(|b64| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
        })
        .and_then(|bytes| String::from_utf8(bytes).ok());
    let Some((user, password)) = credentials.as_deref().and_then(|c| c.split_once(':')) else {
        return unauthorized("the Authorization header is not HTTP basic credentials");
    };
    match auth.check(user, password).await {
        Some(true) => next.run(request).await,
        Some(false) => unauthorized("wrong user name or password"),
        None => {
            let body = serde_json::json!({"error_code": 503, "message": "too many logins being checked; try again"});
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "1")],
                axum::Json(body),
            )
                .into_response()
        }
    }
}

/// The REST router behind basic authentication.
pub fn protect(router: axum::Router, auth: Arc<BasicAuth>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(auth, require))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many requests with wrong passwords at once run one Argon2
    /// verification at a time (they ran all at once on the blocking pool
    /// that transforms and commits share), and good credentials are
    /// verified once, then remembered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn verifications_are_bounded_and_good_ones_remembered() {
        let hash = hash_password("right").unwrap();
        let auth = Arc::new(BasicAuth::parse(&format!("ann:{hash}\n"), false).unwrap());
        let attempts: Vec<_> = (0..24)
            .map(|i| {
                let auth = auth.clone();
                tokio::spawn(async move { auth.check("ann", &format!("wrong{i}")).await })
            })
            .collect();
        for a in attempts {
            assert_eq!(a.await.unwrap(), Some(false));
        }
        let (runs, peak) = auth.verification_counts();
        assert_eq!(runs, 24);
        assert_eq!(peak, CONCURRENT_VERIFICATIONS, "verifications at once");
        for _ in 0..10 {
            assert_eq!(auth.check("ann", "right").await, Some(true));
        }
        assert_eq!(
            auth.verification_counts().0,
            25,
            "verified once, then remembered"
        );
        assert_eq!(auth.check("ann", "wrong").await, Some(false));
        // The same wrong password again, as a script with a stale secret
        // retries it: refused from memory, with no verification.
        let before = auth.verification_counts().0;
        for _ in 0..2 {
            assert_eq!(auth.check("ann", "wrong3").await, Some(false));
        }
        assert_eq!(auth.verification_counts().0, before, "refusals remembered");
    }
}
