# OpenStack instances booted from a Talos image; the machine config is user_data, served from a
# config drive so no metadata service is needed.
# Credentials: the usual OS_* variables (OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME,
# OS_USER_DOMAIN_NAME, OS_PROJECT_DOMAIN_NAME, OS_REGION_NAME) or an application credential
# (OS_APPLICATION_CREDENTIAL_ID, OS_APPLICATION_CREDENTIAL_SECRET).

terraform {
  required_version = ">= 1.4"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = ">= 1.54"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role              = string
    user_data         = string
    size              = optional(string)
    image             = optional(string)
    availability_zone = optional(string)
  }))
  sensitive = true
}

variable "default_size" {
  description = "Flavor name when a machine has no size."
  type        = string
}

variable "default_image" {
  description = "Talos image id when a machine has no image."
  type        = string
  default     = null
}

variable "network_ids" {
  description = "Networks to attach, first one primary. Use a dual-stack network for IPv6."
  type        = list(string)
}

variable "security_groups" {
  type    = list(string)
  default = ["default"]
}

locals {
  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role  = nonsensitive(var.machines[name].role)
      size  = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image = coalesce(nonsensitive(var.machines[name].image), var.default_image)
      zone  = nonsensitive(var.machines[name].availability_zone)
    }
  }
}

resource "openstack_compute_instance_v2" "machine" {
  for_each = local.names

  name              = "${var.cluster_name}-${each.key}"
  flavor_name       = local.spec[each.key].size
  image_id          = local.spec[each.key].image
  availability_zone = local.spec[each.key].zone
  security_groups   = var.security_groups
  user_data         = var.machines[each.key].user_data
  config_drive      = true

  metadata = {
    "rezus.cloud/cluster" = var.cluster_name
    "rezus.cloud/role"    = local.spec[each.key].role
  }

  dynamic "network" {
    for_each = var.network_ids
    content {
      uuid = network.value
    }
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data, image_id]
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, i in openstack_compute_instance_v2.machine : name => {
      ipv4 = i.access_ip_v4 != "" ? i.access_ip_v4 : null
      ipv6 = i.access_ip_v6 != "" ? trim(i.access_ip_v6, "[]") : null
    }
  }
}
