"""gpugen: inventory of GPU classes and research groups -> GitOps tree for Kubeflow Trainer and Kueue."""
