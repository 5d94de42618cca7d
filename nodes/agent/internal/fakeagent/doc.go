// Package fakeagent is what the fake agent executables of the agent tests
// (nodes/agent/testdata/fake*) share: choosing a scenario from the prompt,
// recording the invocation, hanging with a child in the process group,
// waiting on a gate file, writing status.json. It is test support only.
package fakeagent
