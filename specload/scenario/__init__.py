"""Scenarios: the YAML schema, its loader and the prompt sets a scenario describes.

``load_scenario(path, overrides=None) -> Scenario`` validates everything before any traffic
and raises one ``ConfigError`` line (file, key path, expectation) on bad input.
``Scenario.schedule() -> list[StepPlan]`` is the step ladder, repeated whole per repeat.
Prompt sets live in ``specload.scenario.prompts`` (``build_prompt_set``).
The schema is documented for users in ``docs/scenarios.md``.
"""

from specload.scenario.parse import load_scenario, parse_scenario
from specload.scenario.schema import ContractSpec, PromptSpec, Scenario, StepPlan

__all__ = [
    "ContractSpec",
    "PromptSpec",
    "Scenario",
    "StepPlan",
    "load_scenario",
    "parse_scenario",
]
