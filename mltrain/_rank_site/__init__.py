"""mltrain's exit hook for script ranks (sitecustomize); see sitecustomize.py."""
