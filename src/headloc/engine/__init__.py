"""The evaluation engine, headloc's seam with lm-eval: a task scored on a model with heads ablated
(``evaluation``: ``AblatedLM``, ``MaskEvaluator``, ``TaskSpec``), many masks sharing one forward
pass (``grouped``), and the gold continuations the gradient methods differentiate
(``supervision``)."""
