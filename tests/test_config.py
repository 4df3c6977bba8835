"""Tests of stepscope.config: the seed's defaults and scenarios, validation, files."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import stepscope.config as config_module
from stepscope.config import (
    ConfigError,
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    FrameworkProfile,
    JobConfig,
    Profiler,
    ProfilerConfig,
    ProfilingCostWarning,
    ProfilingWindow,
    PythonProfiler,
    PythonProfilingConfig,
    StepRange,
    StepscopeConfig,
    TimeRange,
    cProfileTimer,
    load_toml,
    resolve_config,
)
from stepscope.errors import quote

INTERVAL_ERROR = (
    "Invalid value 700 for system_monitor_interval_millis. "
    "Accepted values are 100, 200, 500, 1000, 5000, 60000."
)


def window(kind: str, start: int, num: int, **options: Any) -> ProfilingWindow:
    all_defaults: dict[str, dict[str, Any]] = {
        "detailed": {},
        "dataloader": {"metrics_regex": ".*"},
        "python": {
            "python_profiler": PythonProfiler.CPROFILE,
            "cprofile_timer": cProfileTimer.TOTAL_TIME,
        },
    }
    defaults = all_defaults[kind]
    return ProfilingWindow(kind, start, num, **{**defaults, **options})  # type: ignore[arg-type]


def steps(windows: list[ProfilingWindow]) -> list[tuple[str, int | None, int | None]]:
    return [(w.kind, w.start_step, w.num_steps) for w in windows]


# --- defaults of the seed ---------------------------------------------------------


def test_profiler_config_defaults() -> None:
    config = ProfilerConfig()
    assert config.output_path is None
    assert config.system_monitor_interval_millis == 500
    assert config.framework_profile_params is None  # framework profiling is opt-in
    assert config.profile_params is None
    assert config.disable_profiler is False
    assert Profiler().cpu_profiling_duration == 3600


def test_framework_profile_defaults() -> None:
    profile = FrameworkProfile()
    assert profile.local_path is None  # ours: inside the job folder
    assert profile.file_max_size == 10485760
    assert profile.file_close_interval == 60
    assert profile.file_open_fail_threshold == 50
    for name in ("detailed", "dataloader", "python", "horovod", "smdataparallel"):
        assert getattr(profile, f"{name}_profiling_config") is None
    ranges = (profile.start_step, profile.num_steps, profile.start_unix_time, profile.duration)
    assert ranges == (None, None, None, None)


def test_option_defaults() -> None:
    assert DetailedProfilingConfig().range == StepRange(5, 1)
    assert DataloaderProfilingConfig().range == StepRange(7, 1)
    assert DataloaderProfilingConfig().metrics_regex == ".*"
    python = PythonProfilingConfig()
    assert python.range == StepRange(9, 3)
    assert python.python_profiler is PythonProfiler.CPROFILE
    assert python.cprofile_timer is cProfileTimer.TOTAL_TIME
    for option in (DetailedProfilingConfig(), DataloaderProfilingConfig(), python):
        assert option.profile_default_steps is False
    detailed = DetailedProfilingConfig()
    flags = (detailed.record_shapes, detailed.profile_memory, detailed.with_stack)
    assert flags == (True, False, False)  # shapes: for the efficiency
    assert detailed.include_prestep is False


def test_range_defaults_of_the_seed() -> None:
    assert StepRange().resolved() == StepRange(0, 1)
    assert StepRange(start_step=4).resolved() == StepRange(4, 1)
    assert StepRange(num_steps=2).resolved() == StepRange(0, 2)
    assert DetailedProfilingConfig(num_steps=2).range == StepRange(0, 2)
    assert TimeRange() == TimeRange(None, None)
    assert DataloaderProfilingConfig(duration=5).range == TimeRange(None, 5.0)


def test_enum_values() -> None:
    assert [p.value for p in PythonProfiler] == ["cprofile", "pyinstrument"]
    assert [t.value for t in cProfileTimer] == ["total_time", "cpu_time", "off_cpu_time"]


def test_job_and_root_defaults() -> None:
    assert JobConfig() == JobConfig("./stepscope-runs", None)
    config = StepscopeConfig()
    assert config.profiler == ProfilerConfig()
    assert config.job == JobConfig()
    assert config.rules == ()
    assert config.debugger is None


# --- the seed's three FrameworkProfile scenarios ---------------------------------


def test_scenario_1_no_argument_uses_every_default() -> None:
    assert FrameworkProfile().windows() == [
        window("detailed", 5, 1),
        window("dataloader", 7, 1),
        window("python", 9, 1, cprofile_timer=cProfileTimer.TOTAL_TIME),
        window("python", 10, 1, cprofile_timer=cProfileTimer.CPU_TIME),
        window("python", 11, 1, cprofile_timer=cProfileTimer.OFF_CPU_TIME),
    ]


def test_scenario_2_common_range_propagates() -> None:
    assert FrameworkProfile(start_step=6, num_steps=1).windows() == [
        window("detailed", 6, 1),
        window("dataloader", 6, 1),
        window("python", 6, 1),
    ]
    timed = FrameworkProfile(start_unix_time=1.7e9, duration=5).windows()
    assert [(w.kind, w.start_unix_time, w.duration) for w in timed] == [
        ("detailed", 1.7e9, 5.0),
        ("dataloader", 1.7e9, 5.0),
        ("python", 1.7e9, 5.0),
    ]
    assert all(w.start_step is None and w.is_time_window for w in timed)


SCENARIO_3: dict[str, Any] = {
    "detailed_profiling_config": DetailedProfilingConfig(start_step=10, num_steps=1),
    "dataloader_profiling_config": DataloaderProfilingConfig(start_step=9, num_steps=2),
    "python_profiling_config": PythonProfilingConfig(start_step=12, num_steps=1),
}
SCENARIO_3_WINDOWS = [
    window("detailed", 10, 1),
    window("dataloader", 9, 2),
    window("python", 12, 1),
]


def test_scenario_3_individual_configs() -> None:
    assert FrameworkProfile(**SCENARIO_3).windows() == SCENARIO_3_WINDOWS


def test_scenario_3_individual_configs_override_the_common_range() -> None:
    # The seed: "the start_step=1 and num_steps=10 will be ignored" (and no cost warning).
    profile = FrameworkProfile(start_step=1, num_steps=10, **SCENARIO_3)
    assert profile.windows() == SCENARIO_3_WINDOWS


def test_only_the_given_options_run() -> None:
    profile = FrameworkProfile(detailed_profiling_config=DetailedProfilingConfig())
    assert steps(profile.windows()) == [("detailed", 5, 1)]
    profile = FrameworkProfile(python_profiling_config=PythonProfilingConfig())
    assert steps(profile.windows()) == [("python", 9, 1), ("python", 10, 1), ("python", 11, 1)]


# --- Python profiling windows ----------------------------------------------------


def test_python_windows() -> None:
    pyinstrument = PythonProfilingConfig(python_profiler=PythonProfiler.PYINSTRUMENT)
    assert pyinstrument.windows() == [
        window("python", 9, 3, python_profiler=PythonProfiler.PYINSTRUMENT, cprofile_timer=None)
    ]
    cpu = PythonProfilingConfig(cprofile_timer=cProfileTimer.CPU_TIME)
    assert cpu.windows() == [window("python", 9, 3, cprofile_timer=cProfileTimer.CPU_TIME)]
    forced = PythonProfilingConfig(
        profile_default_steps=True, cprofile_timer=cProfileTimer.CPU_TIME
    )
    assert [w.cprofile_timer for w in forced.windows()] == list(cProfileTimer)
    # A given range wins over profile_default_steps, as the seed says.
    ranged = PythonProfilingConfig(start_step=20, num_steps=2, profile_default_steps=True)
    assert ranged.windows() == [window("python", 20, 2)]


@pytest.mark.parametrize(
    ("text", "member"),
    [
        ("cProfile", PythonProfiler.CPROFILE),
        ("Pyinstrument", PythonProfiler.PYINSTRUMENT),
        ("PYINSTRUMENT", PythonProfiler.PYINSTRUMENT),
        ("PythonProfiler.CPROFILE", PythonProfiler.CPROFILE),
    ],
)
def test_python_profiler_accepts_strings_in_any_case(text: str, member: PythonProfiler) -> None:
    assert PythonProfilingConfig(python_profiler=text).python_profiler is member  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["off_cpu_time", "OFF_CPU_TIME", "cProfileTimer.OFF_CPU_TIME"])
def test_cprofile_timer_accepts_strings_in_any_case(text: str) -> None:
    config = PythonProfilingConfig(cprofile_timer=text)  # type: ignore[arg-type]
    assert config.cprofile_timer is cProfileTimer.OFF_CPU_TIME


def test_window_helpers() -> None:
    step_window = window("detailed", 5, 2)
    assert step_window.end_step == 7
    assert [s for s in range(10) if step_window.covers_step(s)] == [5, 6]
    time_window = ProfilingWindow("dataloader", start_unix_time=10.0, duration=1.0)
    assert time_window.end_step is None
    assert not time_window.covers_step(0)


# --- conflicts and errors ----------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: DetailedProfilingConfig(start_step=3, duration=4),
        lambda: DataloaderProfilingConfig(num_steps=2, start_unix_time=1.7e9),
        lambda: PythonProfilingConfig(start_step=1, num_steps=1, start_unix_time=1, duration=1),
        lambda: FrameworkProfile(start_step=6, duration=10),
        lambda: ProfilingWindow("python", start_step=1, duration=1.0),
    ],
)
def test_step_and_time_range_conflict(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigError, match="step") as raised:
        make()
    assert "time" in str(raised.value)


ERRORS: list[tuple[Callable[[], object], list[str]]] = [
    (lambda: ProfilerConfig(system_monitor_interval_millis=700), [INTERVAL_ERROR]),
    (
        lambda: ProfilerConfig(system_monitor_interval_millis="fast"),  # type: ignore[arg-type]
        ["'fast'", "100, 200, 500, 1000, 5000, 60000"],
    ),
    (lambda: StepRange(start_step=-1), ["-1", "start_step", "whole numbers >= 0"]),
    (lambda: DetailedProfilingConfig(start_step=-2), ["-2", "start_step", ">= 0"]),
    (lambda: DetailedProfilingConfig(num_steps=0), ["0", "num_steps", "whole numbers >= 1"]),
    (lambda: StepRange(num_steps=1.5), ["1.5", "num_steps", "whole numbers"]),  # type: ignore[arg-type]
    (lambda: StepRange(start_step=True), ["True", "start_step"]),
    (lambda: TimeRange(duration=0), ["0", "duration", "numbers > 0"]),
    (lambda: DataloaderProfilingConfig(duration=-3), ["-3", "duration", "numbers > 0"]),
    (lambda: TimeRange(start_unix_time=-1), ["-1", "start_unix_time", "numbers >= 0"]),
    (lambda: TimeRange(duration=float("nan")), ["nan", "duration"]),
    (
        lambda: DataloaderProfilingConfig(metrics_regex="["),
        ["'['", "metrics_regex", "regular expressions", "does not compile"],
    ),
    (
        lambda: PythonProfilingConfig(python_profiler="yappi"),  # type: ignore[arg-type]
        ["'yappi'", "python_profiler", "'cprofile', 'pyinstrument'"],
    ),
    (
        lambda: PythonProfilingConfig(cprofile_timer="wall"),  # type: ignore[arg-type]
        ["'wall'", "cprofile_timer", "'total_time', 'cpu_time', 'off_cpu_time'"],
    ),
    (lambda: Profiler(cpu_profiling_duration=0), ["0", "cpu_profiling_duration", "> 0"]),
    (lambda: Profiler(cpu_profiling_duration="soon"), ["'soon'", "numbers > 0"]),  # type: ignore[arg-type]
    (lambda: ProfilerConfig(disable_profiler="maybe"), ["'maybe'", "true or false"]),  # type: ignore[arg-type]
    (lambda: ProfilerConfig(profile_params=5), ["5", "profile_params", "a Profiler"]),  # type: ignore[arg-type]
    (lambda: FrameworkProfile(file_max_size=0), ["0", "file_max_size", ">= 1"]),
    (lambda: FrameworkProfile(local_path=""), ["''", "local_path", "non-empty"]),
    (lambda: JobConfig(output=""), ["''", "output", "non-empty"]),
    (
        lambda: FrameworkProfile(horovod_profiling_config={}),
        ["horovod_profiling_config is not supported", "torchrun"],
    ),
    (
        lambda: FrameworkProfile(smdataparallel_profiling_config=object()),
        ["smdataparallel_profiling_config is not supported", "torchrun"],
    ),
    (
        lambda: StepscopeConfig(profiler=ProfilerConfig(output_path="a"), job=JobConfig("b")),
        ["'a'", "'b'", "keep only job.output"],
    ),
    (lambda: StepscopeConfig(rules=({"name": "x"}, 3)), ["3", "rules entry", "tables"]),  # type: ignore[arg-type]
    (
        lambda: ProfilerConfig.from_dict({"s3_output_path": "a", "output_path": "b"}),
        ["'output_path'", "'s3_output_path'"],
    ),
]


@pytest.mark.parametrize(("make", "expected"), ERRORS)
def test_error_messages(make: Callable[[], object], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        make()
    for text in expected:
        assert text in str(raised.value)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
    assert issubclass(ProfilingCostWarning, UserWarning)


@pytest.mark.parametrize("name", ["bert-42", "a", "run_1.final", "x" * 128, "..a"])
def test_valid_job_names(name: str) -> None:
    assert JobConfig(name=name).name == name


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("my job", "'my-job'"), ("a/b", "'a-b'"), (".", ""), ("..", ""), ("", ""), ("x" * 129, "")],
)
def test_invalid_job_names(name: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match="job name") as raised:
        JobConfig(name=name)
    message = str(raised.value)
    assert quote(name) in message  # a long name is cut (80 characters, and its length)
    assert "A-Z, a-z, 0-9, '.', '_' and '-'" in message
    assert suggestion in message


def test_configs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ProfilerConfig().disable_profiler = True  # type: ignore[misc]


# --- unknown keys ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "section", "key", "suggestion"),
    [
        ({"profilr": {}}, "[top level]", "'profilr'", "'profiler'"),
        ({"job": {"nmae": "x"}}, "[job]", "'nmae'", "'name'"),
        (
            {"profiler": {"interval": 100}},
            "[profiler]",
            "'interval'",
            "'system_monitor_interval_millis'",
        ),
        ({"profiler": {"zzz": 1}}, "[profiler]", "'zzz'", None),
        (
            {"profiler": {"system_monitor_interval_ms": 100}},
            "[profiler]",
            "'system_monitor_interval_ms'",
            "'system_monitor_interval_millis'",
        ),
        (
            {"profiler": {"framework_profile_params": {"num_step": 2}}},
            "[profiler.framework_profile_params]",
            "'num_step'",
            "'num_steps'",
        ),
        (
            {
                "profiler": {
                    "framework_profile_params": {"python_profiling_config": {"profiler": "x"}}
                }
            },
            "[profiler.framework_profile_params.python_profiling_config]",
            "'profiler'",
            "'python_profiler'",
        ),
        (
            {"profiler": {"profile_params": {"cpu_profiling_duraton": 1}}},
            "[profiler.profile_params]",
            "'cpu_profiling_duraton'",
            "'cpu_profiling_duration'",
        ),
    ],
)
def test_unknown_keys_name_section_valid_keys_and_suggestion(
    data: dict[str, Any], section: str, key: str, suggestion: str | None
) -> None:
    with pytest.raises(ConfigError) as raised:
        StepscopeConfig.from_dict(data)
    message = str(raised.value)
    assert f"Unknown key {key}" in message
    assert section in message
    assert "Valid keys are" in message
    if suggestion:
        assert f"Did you mean {suggestion}?" in message
    else:
        assert "Did you mean" not in message


def test_seed_aliases() -> None:
    config = ProfilerConfig.from_dict(
        {"s3_output_path": "s3://bucket/out", "profiler_params": {"cpu_profiling_duration": 60}}
    )
    assert config.output_path == "s3://bucket/out"
    assert config.profile_params == Profiler(60)
    assert "s3_output_path" not in config.to_dict()


def test_profile_params_accepts_a_dict() -> None:
    config = ProfilerConfig(profile_params={"cpu_profiling_duration": "60"})  # type: ignore[arg-type]
    assert config.profile_params == Profiler(60.0)


# --- string numbers and None ---------------------------------------------------------


def test_string_numbers_are_converted() -> None:
    profile = FrameworkProfile.from_dict(
        {
            "start_step": "5",
            "num_steps": " 2 ",
            "file_max_size": "1024",
            "file_close_interval": "2.5",
            "dataloader_profiling_config": {"start_step": "9", "num_steps": 2.0},
        }
    )
    assert (profile.start_step, profile.num_steps, profile.file_max_size) == (5, 2, 1024)
    assert profile.file_close_interval == 2.5
    assert steps(profile.windows()) == [("dataloader", 9, 2)]
    assert TimeRange("1700000000", "2.5") == TimeRange(1.7e9, 2.5)  # type: ignore[arg-type]
    assert (
        ProfilerConfig.from_dict({"system_monitor_interval_millis": "100"}).to_dict()[
            "system_monitor_interval_millis"
        ]
        == 100
    )
    assert ProfilerConfig.from_dict({"disable_profiler": "True"}).disable_profiler is True
    assert Profiler("3600").cpu_profiling_duration == 3600.0  # type: ignore[arg-type]


def test_none_means_not_given() -> None:
    # The seed's ProfilerConfig defaults system_monitor_interval_millis to None (500 ms).
    assert ProfilerConfig(system_monitor_interval_millis=None).system_monitor_interval_millis == 500  # type: ignore[arg-type]
    assert ProfilerConfig.from_dict({"system_monitor_interval_millis": None}) == ProfilerConfig()


# --- round trips -----------------------------------------------------------------


def random_option(rng: random.Random, cls: type[Any]) -> Any:
    kwargs: dict[str, Any] = {}
    choice = rng.choice(["none", "steps", "start", "time"])
    if choice == "steps":
        kwargs.update(start_step=rng.randint(0, 50), num_steps=rng.randint(1, 3))
    elif choice == "start":
        kwargs.update(start_step=rng.randint(0, 50))
    elif choice == "time":
        kwargs.update(start_unix_time=rng.choice([None, 1.7e9 + rng.random()]), duration=2.5)
    kwargs["profile_default_steps"] = rng.random() < 0.3
    if cls is DetailedProfilingConfig:
        kwargs.update(record_shapes=rng.random() < 0.5, with_stack=rng.random() < 0.5)
    elif cls is DataloaderProfilingConfig:
        kwargs["metrics_regex"] = rng.choice([".*", "^fetch", r"worker\d+"])
    else:
        kwargs["python_profiler"] = rng.choice(list(PythonProfiler))
        kwargs["cprofile_timer"] = rng.choice(list(cProfileTimer))
    return cls(**kwargs)


def random_config(rng: random.Random) -> StepscopeConfig:
    framework = None
    if rng.random() < 0.8:
        options = {
            "detailed_profiling_config": DetailedProfilingConfig,
            "dataloader_profiling_config": DataloaderProfilingConfig,
            "python_profiling_config": PythonProfilingConfig,
        }
        framework = FrameworkProfile(
            local_path=rng.choice([None, "/tmp/traces"]),
            file_max_size=rng.randint(1, 10**8),
            start_step=rng.choice([None, 3]),
            **{k: random_option(rng, v) for k, v in options.items() if rng.random() < 0.5},
        )
    profiler = ProfilerConfig(
        system_monitor_interval_millis=rng.choice([100, 200, 500, 1000, 5000, 60000]),
        framework_profile_params=framework,
        profile_params=rng.choice([None, Profiler(rng.uniform(1, 7200))]),
        disable_profiler=rng.random() < 0.5,
    )
    job = JobConfig(output=rng.choice(["runs", "memory://x", "s3://b/p"]), name="job-1")
    rules = tuple({"name": f"Rule{i}", "threshold": i} for i in range(rng.randint(0, 2)))
    debugger = rng.choice([None, {"hook_parameters": {"save_interval": 10}}])
    return StepscopeConfig(profiler, job, rules, debugger)


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_through_json(seed: int) -> None:
    config = random_config(random.Random(seed))
    data = json.loads(json.dumps(config.to_dict()))
    again = StepscopeConfig.from_dict(data)
    assert again == config
    assert again.to_dict() == data
    framework = config.profiler.framework_profile_params
    if framework is not None:
        assert FrameworkProfile.from_dict(framework.to_dict()) == framework
        for w in framework.windows():
            assert ProfilingWindow.from_dict(json.loads(json.dumps(w.to_dict()))) == w


@pytest.mark.parametrize(
    "value",
    [
        StepRange(3, 2),
        StepRange(),
        TimeRange(1.7e9, 4.0),
        Profiler(12.5),
        JobConfig("out", "n"),
        PythonProfilingConfig(python_profiler=PythonProfiler.PYINSTRUMENT),
    ],
)
def test_round_trip_of_small_classes(value: Any) -> None:
    assert type(value).from_dict(json.loads(json.dumps(value.to_dict()))) == value


# --- cost warnings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda: FrameworkProfile(start_step=1, num_steps=10),
            ["Detailed profiling of 10 steps", "Dataloader profiling of 10 steps"],
        ),
        (
            lambda: FrameworkProfile(
                detailed_profiling_config=DetailedProfilingConfig(start_step=5, num_steps=4)
            ),
            ["Detailed profiling of 4 steps"],
        ),
        (
            lambda: FrameworkProfile(
                dataloader_profiling_config=DataloaderProfilingConfig(duration=10.5)
            ),
            ["Dataloader profiling of 10.5 s"],
        ),
    ],
)
def test_costly_windows_warn(make: Callable[[], FrameworkProfile], expected: list[str]) -> None:
    with pytest.warns(ProfilingCostWarning) as record:
        profile = make()
    messages = [str(w.message) for w in record]
    assert [m.split(" is costly")[0] for m in messages] == expected
    assert all("at most 3 steps or 10 s" in m for m in messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile.windows()  # resolving again does not warn again


@pytest.mark.parametrize(
    "make",
    [
        lambda: FrameworkProfile(start_step=0, num_steps=3),
        lambda: FrameworkProfile(duration=10),
        lambda: FrameworkProfile(python_profiling_config=PythonProfilingConfig(num_steps=50)),
        lambda: FrameworkProfile(start_step=1, num_steps=10, **SCENARIO_3),
    ],
)
def test_cheap_or_python_windows_do_not_warn(make: Callable[[], FrameworkProfile]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make()


# --- files, environment, arguments ---------------------------------------------------

TOML = """
[job]
output = "runs"
name = "bert-42"

[profiler]
system_monitor_interval_millis = 100
disable_profiler = false

[profiler.framework_profile_params]
start_step = 5
num_steps = 2

[profiler.framework_profile_params.python_profiling_config]
start_step = 12
python_profiler = "pyinstrument"

[profiler.profile_params]
cpu_profiling_duration = 3600

[[rules]]
name = "StepOutlier"
"""


@pytest.fixture
def toml_file(tmp_path: Path) -> Path:
    path = tmp_path / "stepscope.toml"
    path.write_text(TOML)
    return path


def test_file_layout(toml_file: Path) -> None:
    config = resolve_config(toml_file)
    assert config.job == JobConfig("runs", "bert-42")
    assert config.profiler.system_monitor_interval_millis == 100
    assert config.profiler.profile_params == Profiler(3600)
    assert config.rules == ({"name": "StepOutlier"},)
    framework = config.profiler.framework_profile_params
    assert framework is not None
    # The python option is given, so only it runs and the common 5/2 range is ignored.
    assert framework.windows() == [
        window("python", 12, 1, python_profiler=PythonProfiler.PYINSTRUMENT, cprofile_timer=None)
    ]
    assert load_toml(toml_file)["profiler"]["framework_profile_params"]["num_steps"] == 2


def test_precedence_defaults_file_env_args(toml_file: Path) -> None:
    assert resolve_config() == StepscopeConfig()
    env = {"STEPSCOPE_OUTPUT": "env-out", "STEPSCOPE_INTERVAL_MS": "1000", "OTHER": "x"}
    from_env = resolve_config(toml_file, env=env)
    assert from_env.job == JobConfig("env-out", "bert-42")  # name still from the file
    assert from_env.profiler.system_monitor_interval_millis == 1000
    assert from_env.profiler.profile_params == Profiler(3600)  # untouched file value

    env |= {"STEPSCOPE_JOB": "env-job", "STEPSCOPE_DISABLE": "1"}
    args = {"output": "arg-out", "job": None, "interval_ms": 5000, "disable_profiler": None}
    final = resolve_config(toml_file, env=env, args=args)
    assert final.job == JobConfig("arg-out", "env-job")
    assert final.profiler.system_monitor_interval_millis == 5000
    assert final.profiler.disable_profiler is True
    assert (
        resolve_config(toml_file, args={"disable_profiler": False}).profiler.disable_profiler
        is False
    )


def test_empty_environment_values_are_unset(toml_file: Path) -> None:
    config = resolve_config(toml_file, env={"STEPSCOPE_JOB": "", "STEPSCOPE_DISABLE": " "})
    assert config.job.name == "bert-42"
    assert config.profiler.disable_profiler is False


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("0", False), ("FALSE", False)])
def test_disable_from_environment(text: str, expected: bool) -> None:
    config = resolve_config(env={"STEPSCOPE_DISABLE": text})
    assert config.profiler.disable_profiler is expected


def test_output_path_alias_in_a_file_and_its_override(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[profiler]\ns3_output_path = "s3://bucket/runs"\n')
    config = resolve_config(path)
    assert config.job.output == "s3://bucket/runs"
    overridden = resolve_config(path, env={"STEPSCOPE_OUTPUT": "local"})
    assert overridden.job.output == "local"
    assert overridden.profiler.output_path is None


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[job]\noutput = "runs"\nname = bert-42\n')
    with pytest.raises(ConfigError) as raised:
        resolve_config(path)
    message = str(raised.value)
    assert str(path) in message
    assert "line 3" in message
    assert "Invalid TOML" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_toml(tmp_path / "missing.toml")


def test_file_errors_name_the_file_and_section(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[profiler]\nsystem_monitor_interval_millis = 700\n")
    with pytest.raises(ConfigError) as raised:
        resolve_config(path)
    assert str(raised.value) == f"{path} [profiler]: {INTERVAL_ERROR}"
    path.write_text("[profiler.framework_profile_params]\nnum_step = 2\n")
    with pytest.raises(ConfigError, match="Did you mean 'num_steps'") as raised:
        resolve_config(path)
    assert str(path) in str(raised.value)


def test_environment_and_argument_errors_name_their_source() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_config(env={"STEPSCOPE_INTERVAL_MS": "700"})
    assert "STEPSCOPE_INTERVAL_MS" in str(raised.value)
    assert "100, 200, 500, 1000, 5000, 60000" in str(raised.value)
    with pytest.raises(ConfigError, match="argument job='a b'"):
        resolve_config(args={"job": "a b"})
    with pytest.raises(ConfigError, match="Did you mean 'interval_ms'"):
        resolve_config(args={"interval": 100})


# --- the module ----------------------------------------------------------------------


def test_public_names_are_sorted_and_exported() -> None:
    names = config_module.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n[0].islower(), n))
    for name in names:
        assert hasattr(config_module, name)


@pytest.mark.process
def test_importing_config_imports_no_torch() -> None:
    code = "import sys, stepscope.config; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_a_memory_window_runs_only_where_named():
    from stepscope.config import FrameworkProfile

    assert "memory" not in {w.kind for w in FrameworkProfile().windows()}
    assert "memory" not in {w.kind for w in FrameworkProfile(start_step=3).windows()}
    profile = FrameworkProfile.from_dict(
        {"memory_profiling_config": {"start_step": "4", "num_steps": 2, "max_entries": "500"}}
    )
    (window,) = profile.windows()
    assert (window.kind, window.start_step, window.num_steps) == ("memory", 4, 2)
    assert window.max_entries == 500
    assert ProfilingWindow.from_dict(window.to_dict()) == window
    with pytest.raises(ConfigError, match=r"max_entries.*whole numbers >= 1"):
        FrameworkProfile.from_dict({"memory_profiling_config": {"max_entries": 0}})
