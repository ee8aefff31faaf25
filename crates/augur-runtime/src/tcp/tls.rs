//! TLS on node connections, with `rustls` (TLS 1.3, the `ring` provider).
//!
//! A cluster has one certificate authority. Each node holds a certificate it signed whose
//! subject alternative name is [`node_server_name`] (`node-ID.augur`): that name, not the id a
//! frame claims, is the node's identity. A node dialling a peer checks that the peer's
//! certificate carries the name of the node it meant to reach, and presents its own certificate
//! in turn; a node accepting a connection that says it is node N checks that the client
//! certificate it was shown is valid for node N's name. Clients check the node's certificate
//! the same way but present none: they authenticate with the cluster's client token, if one is
//! set (see the module docs of [`super`]).

use augur_types::NodeId;
use rustls::RootCertStore;
use rustls::client::verify_server_name;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The DNS name a node's certificate must carry: `node-ID.augur`.
pub fn node_server_name(id: NodeId) -> String {
    format!("node-{}.augur", id.0)
}

fn server_name(id: NodeId) -> ServerName<'static> {
    ServerName::try_from(node_server_name(id)).expect("node names are valid DNS names")
}

/// The process-wide crypto provider (`ring`), chosen explicitly so that no other provider a
/// dependency enables can make the choice ambiguous.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: no certificate in the file"));
    }
    Ok(certs)
}

fn roots(ca_pem: &[u8], what: &str) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem, what)? {
        roots
            .add(cert)
            .map_err(|e| format!("{what}: unusable CA certificate: {e}"))?;
    }
    Ok(Arc::new(roots))
}

/// A node's TLS side: it accepts peers (who must show a certificate) and clients (who need
/// not), and dials peers showing its own certificate.
pub struct NodeTls {
    pub(super) acceptor: TlsAcceptor,
    pub(super) connector: TlsConnector,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeTls")
    }
}

impl NodeTls {
    /// Node `me`'s TLS from PEM text: the cluster's CA certificate, the node's certificate
    /// (chain) and its private key. The certificate must be valid for `me`'s name.
    pub fn from_pem(
        me: NodeId,
        ca_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<NodeTls, String> {
        let roots = roots(ca_pem, "CA")?;
        let chain = certificates(cert_pem, "node certificate")?;
        let own = ParsedCertificate::try_from(&chain[0])
            .map_err(|e| format!("node certificate: unreadable: {e}"))?;
        verify_server_name(&own, &server_name(me)).map_err(|_| {
            format!(
                "node certificate: not issued for node {me} (it must name {})",
                node_server_name(me)
            )
        })?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| format!("node key: not a PEM private key: {e}"))?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("CA: {e}"))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("node certificate and key: {e}"))?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("node certificate and key: {e}"))?;
        Ok(NodeTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        })
    }

    /// Node `me`'s TLS from files (PEM), named in every error.
    pub fn load(me: NodeId, ca: &Path, cert: &Path, key: &Path) -> Result<NodeTls, String> {
        NodeTls::from_pem(me, &read(ca)?, &read(cert)?, &read(key)?).map_err(|e| {
            format!(
                "{e} (CA {}, certificate {}, key {})",
                ca.display(),
                cert.display(),
                key.display()
            )
        })
    }

    pub(super) fn server_name(&self, peer: NodeId) -> ServerName<'static> {
        server_name(peer)
    }
}

/// A client's TLS side: it trusts the cluster's CA and checks each node's name.
#[derive(Clone)]
pub struct ClientTls {
    pub(super) connector: TlsConnector,
}

impl ClientTls {
    pub fn from_pem(ca_pem: &[u8]) -> Result<ClientTls, String> {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots(ca_pem, "CA")?)
            .with_no_client_auth();
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    pub fn load(ca: &Path) -> Result<ClientTls, String> {
        ClientTls::from_pem(&read(ca)?).map_err(|e| format!("{}: {e}", ca.display()))
    }

    pub(super) fn server_name(&self, node: NodeId) -> ServerName<'static> {
        server_name(node)
    }
}

/// Whether `cert`, the certificate a connection presented (already verified against the CA by
/// the handshake), belongs to node `claimed`.
pub(super) fn check_peer_identity(
    cert: Option<&CertificateDer<'static>>,
    claimed: NodeId,
) -> Result<(), String> {
    let Some(cert) = cert else {
        return Err(format!(
            "says it is node {claimed} but presented no certificate"
        ));
    };
    let parsed =
        ParsedCertificate::try_from(cert).map_err(|e| format!("unreadable certificate: {e}"))?;
    verify_server_name(&parsed, &server_name(claimed)).map_err(|_| {
        format!(
            "says it is node {claimed} but its certificate is not issued for {}",
            node_server_name(claimed)
        )
    })
}

/// A cluster's certificates as PEM text, made by [`generate_pki`].
pub struct GeneratedPki {
    pub ca_cert: String,
    /// Only needed to sign more node certificates later; keep it off the nodes.
    pub ca_key: String,
    /// By node id.
    pub nodes: Vec<NodeCertificate>,
}

/// One node's certificate, signed by the cluster's CA, and its private key.
pub struct NodeCertificate {
    pub cert: String,
    pub key: String,
}

/// Make a certificate authority for cluster `cluster_id` and a certificate for each of its
/// `nodes` nodes, valid for [`node_server_name`] as both server and client (a node dials its
/// peers with it). ECDSA P-256 keys; the certificates do not expire (rcgen's default validity,
/// to the year 4096): rotate them by generating new ones.
pub fn generate_pki(cluster_id: &str, nodes: usize) -> Result<GeneratedPki, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let err = |e: rcgen::Error| format!("cannot generate certificates: {e}");
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, format!("augur cluster {cluster_id} CA"));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut certs = Vec::with_capacity(nodes);
    for id in 0..nodes {
        let name = node_server_name(NodeId(id as u32));
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(vec![name.clone()]).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        certs.push(NodeCertificate {
            cert: cert.pem(),
            key: key.serialize_pem(),
        });
    }
    Ok(GeneratedPki {
        ca_cert: ca_cert.pem(),
        ca_key: ca_key_pem,
        nodes: certs,
    })
}
