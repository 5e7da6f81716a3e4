"""The kube-apiserver tier: kubeconform and the real kube-apiserver (dry-run), the charts, researchers' access."""
