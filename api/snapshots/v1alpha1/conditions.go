package v1alpha1

// Condition types of a SandboxSnapshot.
const (
	// ConditionCaptured is True once the image holding the capture is stored; False with the
	// cause while waiting or after a failure.
	ConditionCaptured = "Captured"
	// ConditionTemplateReady is True once the SandboxTemplate running the image is published.
	ConditionTemplateReady = "TemplateReady"
	// ConditionReady is True when Captured and TemplateReady are.
	ConditionReady = "Ready"
	// ConditionSourceResumed is set on a snapshot whose capture failed after it started: True
	// once a resume Pod made sure the source container is not left paused (a capture killed
	// with SIGKILL cannot resume it itself), False while that is pending or failed.
	ConditionSourceResumed = "SourceResumed"
	// ConditionImageDeleted is set on a snapshot being deleted: False while Sandboxes or
	// SandboxTemplates of its namespace still run its image (a Pod may need to pull it again) or
	// while the registry cannot be reached, True once the registry deleted the manifest.
	ConditionImageDeleted = "ImageDeleted"
)

// Reasons of the snapshot conditions.
const (
	ReasonSandboxNotFound   = "SandboxNotFound"
	ReasonSandboxNotReady   = "SandboxNotReady"
	ReasonContainerNotFound = "ContainerNotFound"
	// ReasonCaptureNotConfigured: the controller runs without a repository or capture image.
	ReasonCaptureNotConfigured = "CaptureNotConfigured"
	// ReasonSourceTemplateNotFound: the Sandbox names a SandboxTemplate that no longer exists, so
	// the spec to publish is unknown (the Sandbox's own may hold a claim's settings).
	ReasonSourceTemplateNotFound = "SourceTemplateNotFound"
	ReasonCaptureRunning         = "CaptureRunning"
	ReasonCaptureFailed          = "CaptureFailed"
	// ReasonCaptureLost: the capture Pod vanished or was evicted before it reported a result.
	ReasonCaptureLost      = "CaptureLost"
	ReasonCaptured         = "Captured"
	ReasonTemplatePending  = "TemplatePending"
	ReasonTemplateConflict = "TemplateConflict"
	// ReasonTemplateMissing: the published template was deleted; the image remains.
	ReasonTemplateMissing   = "TemplateMissing"
	ReasonTemplatePublished = "TemplatePublished"
	ReasonReady             = "Ready"
	// ReasonResumePending: the resume Pod is created or running.
	ReasonResumePending = "ResumePending"
	// ReasonResumeFailed: the resume Pod failed; it is retried.
	ReasonResumeFailed = "ResumeFailed"
	// ReasonResumed: the source container is not paused.
	ReasonResumed = "Resumed"
	// ReasonSourceGone: the container the status names is not a container of the Sandbox's Pod
	// on that node any more (the Pod was replaced or deleted), so there is nothing to resume.
	ReasonSourceGone = "SourceGone"
	// ReasonImageInUse: Sandboxes or SandboxTemplates of the namespace run the image; it is
	// deleted when the last of them is.
	ReasonImageInUse = "ImageInUse"
	// ReasonImageDeleteRetrying: the registry could not be reached or failed; it is retried until
	// the image delete timeout.
	ReasonImageDeleteRetrying = "ImageDeleteRetrying"
	// ReasonImageNotDeleted: the registry refused the deletion (or kept failing), or the image is
	// outside the configured repository; the snapshot goes anyway and an event names the image.
	ReasonImageNotDeleted = "ImageNotDeleted"
	// ReasonImageDeleted: the registry no longer serves the manifest.
	ReasonImageDeleted = "ImageDeleted"
)
