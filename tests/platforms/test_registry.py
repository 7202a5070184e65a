"""The registry reads every platform's declaration without loading a platform: the config loader, the CLI and
the http app import config models only, so an SDK loads with the adapter of an enabled platform alone."""

from __future__ import annotations

import json
import subprocess
import sys

from gateway.platforms import PLATFORMS, adapter_class, config_class, home_files, noisy_loggers, secret_patterns


def test_reading_the_declarations_and_the_config_imports_no_adapter() -> None:
    code = ("import json, sys; import gateway.config, gateway.cli, gateway.ops.http, gateway.ops.dashboard; "
            "from gateway.platforms import declare_to_logs; declare_to_logs(); "
            "print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True, timeout=60).stdout))
    for name, declared in PLATFORMS.items():
        adapter_module = f"gateway.platforms.{name}.{declared.adapter.partition(':')[0]}"
        assert adapter_module not in loaded, f"{adapter_module} was imported with the config"
        assert f"gateway.platforms.{name}.{declared.config.partition(':')[0]}" in loaded


def test_every_declaration_points_at_its_classes() -> None:
    from gateway.kernel.configbase import PlatformConfig
    from gateway.platforms.base import PlatformAdapter

    for name in PLATFORMS:
        assert issubclass(adapter_class(name), PlatformAdapter) and adapter_class(name).name == name
        assert issubclass(config_class(name), PlatformConfig)
    assert all(isinstance(x, str) and x for x in [*noisy_loggers(), *secret_patterns()])
    assert all("/" not in file for _, file in home_files())  # a name in the profile's home
