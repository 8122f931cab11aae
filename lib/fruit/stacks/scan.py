"""Whole-sequence dVPDA readings (placeholder: steps the DVPDAStack)."""

from fruit.stacks.nondeterministic import dvpda_readings_stepwise


def dvpda_readings(action_logits, pushed_log, bottom_log, num_states, num_symbols):
    return dvpda_readings_stepwise(action_logits, pushed_log, bottom_log, num_states, num_symbols)
