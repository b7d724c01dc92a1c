//! HTTPS for the simulator: the same router served over rustls by axum-server, for testing
//! clients against a server whose certificate a private CA signed.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use tokio::task::JoinHandle;

use super::config::TlsIdentity;

/// How long open connections get to finish after the stop signal.
const GRACE: Duration = Duration::from_secs(5);

/// Serves `app` with TLS on `listener` until `stopped` completes, in a background task.
///
/// Installs the `ring` rustls crypto provider as process default if none is installed yet.
///
/// # Errors
/// `InvalidInput` when the certificate chain or private key cannot be used.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    identity: &TlsIdentity,
    app: Router,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = RustlsConfig::from_pem(
        identity.cert_chain_pem.clone(),
        identity.private_key_pem.clone(),
    )
    .await
    .map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("unusable TLS certificate or key: {e}"),
        )
    })?;
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener.into_std()?, config)?.handle(handle.clone());
    tokio::spawn(async move {
        stopped.await;
        handle.graceful_shutdown(Some(GRACE));
    });
    Ok(tokio::spawn(async move {
        let service = app.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(error) = server.serve(service).await {
            tracing::warn!(%error, "simulator server stopped with an error");
        }
    }))
}
