//! HTTP basic authentication of the REST API (`rest.auth.users.file`).
//!
//! The users file has one `user:hash` per line (blank lines and `#`
//! comments skipped); each hash is an Argon2 hash in the standard PHC string
//! format (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`), as `sluice passwd`
//! writes it. Plain-text passwords are refused when the file is loaded.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

/// The users allowed in, with their password hashes.
pub struct BasicAuth {
    /// User name to its PHC hash string (checked parseable at load).
    users: BTreeMap<String, String>,
    /// `/health` answers without credentials (`rest.auth.health.open`).
    health_open: bool,
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
        Ok(Self { users, health_open })
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
    let (user, password) = (user.to_string(), password.to_string());
    let checker = auth.clone();
    let ok = tokio::task::spawn_blocking(move || checker.verify(&user, &password))
        .await
        .unwrap_or(false);
    if !ok {
        return unauthorized("wrong user name or password");
    }
    next.run(request).await
}

/// The REST router behind basic authentication.
pub fn protect(router: axum::Router, auth: Arc<BasicAuth>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(auth, require))
}
