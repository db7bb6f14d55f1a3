//! A TLS terminator in front of a plain-HTTP test server: what a reverse proxy or ingress does
//! for a real deployment. It decrypts and relays bytes (no HTTP parsing), so `Host`, signatures
//! and bodies reach the server exactly as the client sent them. The certificates are the test
//! fixtures of `tests/gotosocial/tls/` (a test CA that the peers are told to trust).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Accepts TLS on its address while it lives; dropping it closes every relayed connection.
pub struct TlsFront {
    accept: JoinHandle<()>,
}

/// A server configuration presenting `cert` (a PEM chain) with `key` (a PEM private key).
pub fn server_config(cert: &Path, key: &Path) -> Arc<rustls::ServerConfig> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .expect("read the certificate chain")
        .collect::<Result<_, _>>()
        .expect("a PEM certificate chain");
    let key = PrivateKeyDer::from_pem_file(key).expect("a PEM private key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("certificate and key match");
    Arc::new(config)
}

impl TlsFront {
    /// Listens on `listen` and relays each connection, decrypted, to `backend`.
    pub async fn start(
        listen: SocketAddr,
        backend: SocketAddr,
        cert: &Path,
        key: &Path,
    ) -> TlsFront {
        let acceptor = tokio_rustls::TlsAcceptor::from(server_config(cert, key));
        let listener = TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| panic!("bind the TLS terminator on {listen}: {e}"));
        let accept = tokio::spawn(async move {
            // Owned here: aborting the accept loop drops the set, which aborts every relay.
            let mut relays = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((socket, _)) = accepted else { continue };
                        let acceptor = acceptor.clone();
                        relays.spawn(async move {
                            let Ok(mut tls) = acceptor.accept(socket).await else { return };
                            let Ok(mut plain) = TcpStream::connect(backend).await else { return };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                    Some(_) = relays.join_next(), if !relays.is_empty() => {}
                }
            }
        });
        TlsFront { accept }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
