"""attnlab's Hydra configs, a package so that Hydra's compose API finds them by module name::

    from hydra import compose, initialize_config_module

    with initialize_config_module("conf", version_base="1.3"):
        cfg = compose("config", overrides=["attention=local"])

config.yaml's defaults start with the typed schema ``attnlab_schema``, which lives in Hydra's ConfigStore: importing
this package stores it there. attnlab's own entry points read this folder by its file path, so a user's ``conf/``
beside their script never hides it from them.
"""

from experiments.config.schema import register_configs

register_configs()
