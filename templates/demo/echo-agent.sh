#!/bin/sh
# The demo's echo agent, run by `coord run <agent> -- sh bin/echo-agent.sh`: it reads its task
# (JSON on stdin), and answers in YAML on stdout, which becomes the task's output. Any program
# that reads stdin and prints an answer can take its place: an LLM CLI, a script, a build.
title=$(sed -n 's/.*"title":"\([^"]*\)".*/\1/p')
echo "by: $COORD_AGENT"
echo "task: $COORD_TASK_ID"
echo "summary: '$COORD_AGENT did: $title'"
