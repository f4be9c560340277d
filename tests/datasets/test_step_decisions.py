"""Reading a method's sub-question decisions from its trace."""

from __future__ import annotations

from dynrag.datasets.step_decisions import step_decisions


def test_step_decisions_reads_the_steps_that_answer_a_subquery():
    steps = [{"kind": "subquery", "details": {"step": 1}},
             {"kind": "decision", "details": {"step": 1}},
             {"kind": "answer", "details": {"step": 1, "subquery": "Who founded Zorlak Mills?", "decision": "retrieve"}},
             {"kind": "answer", "details": {"step": 2, "subquery": "Where was #1 born?", "decision": "parametric"}},
             {"kind": "generate", "details": {}},
             {"kind": "finish"}]
    assert step_decisions(steps) == [{"subquery": "Who founded Zorlak Mills?", "retrieve": True},
                                     {"subquery": "Where was #1 born?", "retrieve": False}]
    assert step_decisions(None) == []
