"""Puts the user's own config folders (`.mltrain/`, `conf/`, $MLTRAIN_CONFIG_PATH) in front of
mltrain's presets, for the `mltrain` app only: other Hydra apps on the machine are left alone."""
from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class MltrainSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from mltrain.config.paths import builtin_search_url, user_conf_dirs  # plugin

        builtin = builtin_search_url()
        if not any(entry.path == builtin for entry in search_path.get_path()):
            return
        for path in reversed(user_conf_dirs()):
            search_path.prepend(provider="mltrain-user", path=f"file://{path}")
