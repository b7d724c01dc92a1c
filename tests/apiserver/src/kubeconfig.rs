//! The kubeconfig file written for kubectl: one cluster `test-apiserver` at the server's plain-HTTP
//! URL, no credentials, current context using namespace `default`.

use std::path::Path;

/// The kubeconfig YAML pointing at `url` with default namespace `namespace`.
pub fn kubeconfig_yaml(url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test-apiserver
  cluster:
    server: {url}
contexts:
- name: test-apiserver
  context:
    cluster: test-apiserver
    user: test-apiserver
    namespace: {namespace}
current-context: test-apiserver
preferences: {{}}
users:
- name: test-apiserver
  user: {{}}
"
    )
}

/// Writes the kubeconfig for `url` to `path`.
///
/// # Errors
/// Any I/O error from writing the file.
pub fn write_kubeconfig(path: &Path, url: &str, namespace: &str) -> std::io::Result<()> {
    std::fs::write(path, kubeconfig_yaml(url, namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reads_the_written_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config");
        write_kubeconfig(&p, "http://127.0.0.1:1234", "ns1").unwrap();
        let kc = kube::config::Kubeconfig::read_from(&p).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("test-apiserver"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:1234"));
    }
}
