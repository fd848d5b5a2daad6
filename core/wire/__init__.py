"""The forwarded-permission wire, one room each (`base` names them all).

Re-exported below only for importers owned by other work in flight (`core/serving.py`,
`core/history/store.py`); everything else imports from the module that holds the name.
"""

from core.wire.decisions import AuthorizerDecision as AuthorizerDecision
from core.wire.decisions import DecisionSource as DecisionSource
from core.wire.decisions import ForwardedDecision as ForwardedDecision
from core.wire.decisions import GateErrorDecision as GateErrorDecision
from core.wire.decisions import RuleDecision as RuleDecision
from core.wire.decisions import SessionApprovalDecision as SessionApprovalDecision
from core.wire.decisions import UnavailableDecision as UnavailableDecision
from core.wire.decisions import UserDecision as UserDecision
from core.wire.decisions import YoloDecision as YoloDecision
from core.wire.decisions import decision_source_json as decision_source_json
from core.wire.limits import over_limit as over_limit
from core.wire.reader import RequestRejected as RequestRejected
from core.wire.reader import parse_request as parse_request
from core.wire.request import ParsedRequest as ParsedRequest
from core.wire.response import ForwardedResponse as ForwardedResponse
from core.wire.response import approve as approve
from core.wire.response import deny as deny
from core.wire.response import encode_response as encode_response
