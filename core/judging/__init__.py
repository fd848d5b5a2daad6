"""This node's own judgment of an ask, before a person sees it: the serving core's `Judge` and `Chain`.

`recorded` is the recorded authority (`RecordedAuthority`: this node's rules from `core.rules`, plus
the serving-session grants a person made; `kept`, its judgments kept for identical asks) and
`LinkChain`, the chain as serving sees it; `links`
holds the chain's links (external judges consulted in order on the child's facts, an allow on a path
capped to defer); `grant_log`, who made each serving-session grant, when, and what it has decided
since. The model judge (`docs/judge.md`) is one idea a module: `model_judge` (the link: caps, advice
for the person, the chain serving consults), `judge_questions` (the questions and the mapping table),
`judge_client` (the endpoint or command), `judge_breaker`, `judge_record` (its reviews and the measures
against the person) and `judge_setup` (its settings, and the chain built from them). A request
without usable facts reaches none of them: it goes to a person.
"""
