package main

import (
	"fmt"

	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	// The json log format, as in external-provisioner.
	_ "k8s.io/component-base/logs/json/register"
)

// loggingGates are the logging feature gates at their defaults, as EP
// builds them: its --feature-gates does not reach them, so the alpha
// options (--log-text-split-stream, --log-json-info-buffer-size, …) are
// refused with anything but their default.
func loggingGates() featuregate.FeatureGate {
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		panic(fmt.Sprintf("logging feature gates: %v", err)) // fixed names, added once
	}
	return fg
}

// checkLogging is what EP's logsapi.ValidateAndApply refuses in c: an
// unknown --logging-format, --vmodule with json, an alpha option, a
// --log-flush-frequency that is not positive.
func checkLogging(c *logsapi.LoggingConfiguration) error {
	if errs := logsapi.Validate(c, loggingGates(), nil); len(errs) > 0 {
		return fmt.Errorf("logging configuration: %w", errs.ToAggregate())
	}
	return nil
}

// applyLogging sends klog's output, and Go's log package's, to the format
// c names, with its verbosity and flush frequency, as EP does once it has
// parsed its flags. It is called once per process, after checkLogging.
func applyLogging(c *logsapi.LoggingConfiguration) error {
	logs.InitLogs()
	return logsapi.ValidateAndApply(c, loggingGates())
}
