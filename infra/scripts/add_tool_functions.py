"""Append template.yaml resources (function + log group) for tool handlers the template lacks,
and keep every function's policy equal to its handler's DYNAMODB_ACTIONS.

Usage: python infra/scripts/add_tool_functions.py [TOOL ...]   (no TOOL: only re-sync policies)
Each TOOL needs functions/TOOL.py with a literal DYNAMODB_ACTIONS; the policy names exactly those
actions (tests/test_policies.py checks it). Resources go before ``Outputs:``; nothing is deployed
from here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def logical(stem: str) -> str:
    return "".join(part.capitalize() for part in stem.split("_"))


def declared(stem: str) -> list[str]:
    tree = ast.parse((ROOT / "functions" / f"{stem}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DYNAMODB_ACTIONS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"functions/{stem}.py declares no DYNAMODB_ACTIONS")


def block(stem: str) -> str:
    name = logical(stem)
    actions = ", ".join(f"dynamodb:{a}" for a in declared(stem))
    return f"""  {name}Function:
    Type: AWS::Serverless::Function
    Properties:
      Handler: {stem}.handler
      Description: "Tool {stem} (POST /v1/tools/{stem})"
      Policies:  # exactly DYNAMODB_ACTIONS of functions/{stem}.py (tests/test_policies.py)
        - Statement:
            - Effect: Allow
              Action: [{actions}]
              Resource:
                - !GetAtt Table.Arn
                - !Sub "${{Table.Arn}}/index/*"
      Events:
        Tool:
          Type: HttpApi
          Properties:
            ApiId: !Ref HttpApi
            Method: POST
            Path: /v1/tools/{stem}
  {name}LogGroup:
    Type: AWS::Logs::LogGroup
    Properties:
      LogGroupName: !Sub /aws/lambda/${{{name}Function}}
      RetentionInDays: !Ref LogRetentionDays

"""


def sync_policies(text: str) -> str:
    """Rewrite the ``Action: [...]`` line under each ``# exactly DYNAMODB_ACTIONS of functions/X.py``."""
    lines = text.split("\n")
    marker = "# exactly DYNAMODB_ACTIONS of functions/"
    for i, line in enumerate(lines):
        if marker in line:
            stem = line.split(marker, 1)[1].split(".py", 1)[0]
            for j in range(i + 1, min(i + 6, len(lines))):
                if lines[j].strip().startswith("Action: ["):
                    indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())]
                    lines[j] = indent + "Action: [" + ", ".join(f"dynamodb:{a}" for a in declared(stem)) + "]"
                    break
    return "\n".join(lines)


def main(stems: list[str]) -> None:
    path = ROOT / "template.yaml"
    text = path.read_text()
    new = "".join(block(s) for s in stems if f"  {logical(s)}Function:" not in text)
    if new:
        head, sep, tail = text.partition("\nOutputs:\n")
        text = head.rstrip("\n") + "\n\n" + new + sep.lstrip("\n") + tail
    path.write_text(sync_policies(text))


if __name__ == "__main__":
    main(sys.argv[1:])
