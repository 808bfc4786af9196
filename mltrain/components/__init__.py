"""The Designer's built-in components, run in each rank as `python -m mltrain.components.<name>`.

`errors` and `checks` are imported by the driver before anything is queued and must not import
torch; the other modules run in the ranks.
"""
