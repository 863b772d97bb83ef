//! The `https://` REST listener: rustls with the certificate chain and key
//! of `listeners.https.ssl.certificate.location` / `.key.location` (PEM).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

/// Loads the PEM files; errors name the key and the file.
pub fn acceptor(certificate: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "listeners.https.ssl.certificate.location: {}: {e}",
                certificate.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "listeners.https.ssl.certificate.location: {} has no PEM certificate",
            certificate.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "listeners.https.ssl.key.location: {}: {e} (expected a PEM private key)",
            key.display()
        )
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!("listeners.https.ssl.key.location: the key does not fit the certificate: {e}")
        })?;
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A client has this long to finish its TLS handshake, then this long to
/// send a request's headers: a silent connection is closed, not kept.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// After a failed accept (out of file descriptors: EMFILE), the listener
/// waits this long, doubling up to a second, rather than spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` over TLS until `stop`; a failed or slow handshake drops
/// that connection only.
pub async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    app: axum::Router,
    stop: CancellationToken,
) {
    let mut backoff = ACCEPT_BACKOFF;
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff = ACCEPT_BACKOFF;
                    a
                }
                Err(e) => {
                    // Logged when the wait starts over, not at every retry.
                    if backoff == ACCEPT_BACKOFF {
                        tracing::warn!(error = %e, "accepting a REST connection failed; backing off");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
        };
        let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer = %peer, "TLS handshake not finished in time; closed");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder
                .http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let connection =
                builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), service);
            tokio::select! {
                _ = connection => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}
