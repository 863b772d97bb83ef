//! The `https://` REST listener: rustls with the certificate chain and key
//! of `listeners.https.ssl.certificate.location` / `.key.location` (PEM),
//! and, with `listeners.https.ssl.client.authentication`, client
//! certificates verified against `listeners.https.ssl.truststore.location`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

/// Loads the PEM files; errors name the key and the file.
pub fn acceptor(settings: &crate::config::RestTls) -> Result<TlsAcceptor, String> {
    let (certificate, key) = (settings.certificate.as_path(), settings.key.as_path());
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
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match (settings.client_auth, &settings.truststore) {
        (crate::config::ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(truststore)) => {
            builder.with_client_cert_verifier(client_verifier(auth, truststore, provider)?)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        format!("listeners.https.ssl.key.location: the key does not fit the certificate: {e}")
    })?;
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Verifies client certificates against the CA certificates in
/// `truststore`; `Requested` also serves clients without one.
fn client_verifier(
    auth: crate::config::ClientAuth,
    truststore: &Path,
    provider: Arc<tokio_rustls::rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn tokio_rustls::rustls::server::danger::ClientCertVerifier>, String> {
    let what = |e: &dyn std::fmt::Display| {
        format!(
            "listeners.https.ssl.truststore.location: {}: {e}",
            truststore.display()
        )
    };
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(truststore).map_err(|e| what(&e))? {
        roots
            .add(cert.map_err(|e| what(&e))?)
            .map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"holds no PEM certificate"));
    }
    let builder = tokio_rustls::rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider,
    );
    let builder = if auth == crate::config::ClientAuth::Requested {
        builder.allow_unauthenticated()
    } else {
        builder
    };
    builder.build().map_err(|e| what(&e))
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
