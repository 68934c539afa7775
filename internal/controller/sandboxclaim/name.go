package sandboxclaim

// ControllerName names the controller's event recorder, as the reference controller does.
const ControllerName = "sandboxclaim-controller"
