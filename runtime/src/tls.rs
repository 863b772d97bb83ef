//! The `https://` REST listener: rustls with the certificate chain and key
//! of `listeners.https.ssl.certificate.location` / `.key.location` (PEM).

use std::path::Path;
use std::sync::Arc;

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

/// Serves `app` over TLS until `stop`; a failed handshake drops that
/// connection only.
pub async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    app: axum::Router,
    stop: CancellationToken,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a REST connection");
                    continue;
                }
            },
        };
        let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop.clone());
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let connection =
                builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), service);
            tokio::select! {
                _ = connection => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}
