package sandboxwarmpool

// ControllerName names the controller's event recorder, as the reference controller does.
const ControllerName = "sandboxwarmpool-controller"
